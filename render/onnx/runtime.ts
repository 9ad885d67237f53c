/**
 * ONNX Runtime, as our code loads it: only after `session.ts` has turned its telemetry off, which
 * must happen before the runtime's library loads (it opens its debug log then). Import `ort` from
 * here, never from onnxruntime-node directly.
 */
import './session.ts';

export * from 'onnxruntime-node';
