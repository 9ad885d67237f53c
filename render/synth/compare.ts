/**
 * The mouth before and now, for measures side by side (the gallery, `npm run bench -- render`, the
 * picture tests): the previous graph and its own viseme table, the shape the current one gets in the
 * middle of an utterance, and the fixture faces they are judged on.
 */
import { fileURLToPath } from 'node:url';
import { VISEME_PARAMS, type Viseme } from '../visemes/index.ts';
import type { MouthShape } from './contract.ts';

/** The graph before the articulatory rework (render/synth/fixtures/README.md). */
export const PREVIOUS_SYNTH_MODEL = fileURLToPath(new URL('./fixtures/mouth_synth_v1.onnx', import.meta.url));

/** The sounds shown, in order, with the viseme each stands for. */
export const GALLERY_SOUNDS: readonly { label: string; viseme: Viseme }[] = [
  { label: 'closed', viseme: 'sil' },
  { label: 'm b p', viseme: 'PP' },
  { label: 'a', viseme: 'aa' },
  { label: 'e', viseme: 'E' },
  { label: 'o', viseme: 'oh' },
  { label: 'u', viseme: 'ou' },
  { label: 'f', viseme: 'FF' },
];

/** The previous renderer's viseme table (open, wide, round), as it shipped with it. */
const PREVIOUS_PARAMS: Readonly<Record<Viseme, readonly [number, number, number]>> = {
  sil: [0, 0, 0],
  PP: [0, 0, 0.1],
  FF: [0.08, 0.2, 0],
  TH: [0.2, 0.2, 0],
  DD: [0.22, 0.25, 0],
  kk: [0.3, 0.2, 0],
  CH: [0.2, 0, 0.6],
  SS: [0.1, 0.45, 0],
  nn: [0.2, 0.2, 0],
  RR: [0.22, 0, 0.45],
  aa: [0.75, 0.2, 0],
  E: [0.5, 0.5, 0],
  ih: [0.25, 0.7, 0],
  oh: [0.55, 0, 0.6],
  ou: [0.2, 0, 0.9],
};

/** Every frontal fixture face (render/rig/fixtures/SOURCES.md): the picture tests hold the mouth on each. */
export const FIXTURE_FACES = [
  'grace_hopper',
  'astronaut',
  'barkla',
  'mendeleev',
  'moseley',
  'curie',
  'biden',
  'obama',
  'obama_speech',
  'obama_small',
];

/**
 * The gallery's faces: the fixtures less the four official White House photographs, whose usage
 * notice asks that they not be shown manipulated (SOURCES.md); the tests still hold the mouth on them.
 */
export const GALLERY_FACES = FIXTURE_FACES.filter(
  (f) => !['biden', 'obama', 'obama_speech', 'obama_small'].includes(f),
);

/** The current renderer's shape for a viseme in the middle of an utterance. */
export function speakingShape(viseme: Viseme): MouthShape {
  return { ...VISEME_PARAMS[viseme], relax: viseme === 'sil' ? 0 : 1 };
}

/** The previous renderer's shape for a viseme (its graph reads the first three parameters). */
export function previousShape(viseme: Viseme): MouthShape {
  const [open, wide, round] = PREVIOUS_PARAMS[viseme];
  return { open, wide, round, press: 0, tuck: 0, relax: 0 };
}
