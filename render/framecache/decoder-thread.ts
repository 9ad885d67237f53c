/** The frame decoder thread (decoder.ts): each request decoded and converted here, its I420 moved back. */
import { parentPort } from 'node:worker_threads';
import type { DecoderReply, DecoderRequest } from './decoder.ts';
import { inProcessFrameDecoder } from './decoder.ts';

const port = parentPort!;

port.on('message', (request: DecoderRequest) => {
  if (request.type === 'release') {
    port.close();
    return;
  }
  const { id, jpeg, width, height } = request;
  inProcessFrameDecoder.jpegToI420(jpeg, width, height).then(
    (i420) => {
      const reply: DecoderReply = { id, i420 };
      port.postMessage(reply, [i420.buffer as ArrayBuffer]);
    },
    (err: unknown) => {
      const e = err instanceof Error ? err : new Error(String(err));
      const reply: DecoderReply = { id, error: { name: e.name, message: e.message } };
      port.postMessage(reply);
    },
  );
});
