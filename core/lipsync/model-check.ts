/**
 * LIPSYNC_MODEL, checked as a process that renders with it starts (the API, the agent worker),
 * before anything else starts: a model that fits no Wav2Lip-class contract stops the process with a
 * message naming what does not fit, as a bad setting does (core/platform/config.ts), rather than failing
 * every render.
 */
import { LIPSYNC_ENV, LipSyncModelError, loadNeuralLipSync, parseLipSyncChoice } from '../../render/lipsync/index.ts';
import type { Logger } from '../platform/log.ts';

/** Loads the model once (on the CPU: the contract is the same on any device), logs how it runs, and lets it go. */
export async function checkLipSyncModel(model: string, log: Logger): Promise<void> {
  const choice = parseLipSyncChoice(model);
  if (choice.kind === 'builtin') return;
  const engine = await loadNeuralLipSync(choice.path);
  await engine.release();
  const c = engine.contract!;
  log.info(
    {
      model: choice.path,
      melInput: c.melInput,
      faceInput: c.faceInput,
      faceOutput: c.faceOutputs[0],
      faceSize: c.faceSize,
      fixedBatch: c.fixedBatch,
    },
    'lip-sync model fits',
  );
}

/** checkLipSyncModel, or the refusal on stderr and exit status 2 (a configuration error). */
export async function checkLipSyncModelOrExit(model: string, log: Logger): Promise<void> {
  try {
    await checkLipSyncModel(model, log);
  } catch (err) {
    if (!(err instanceof LipSyncModelError)) throw err;
    console.error(`${LIPSYNC_ENV}: ${err.message}`);
    process.exit(2);
  }
}
