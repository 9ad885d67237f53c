/**
 * The strict zod schema of the clip-library declaration, the body of PUT /avatars/{avatarId}/clips:
 * `{ expectedRevision, clips: { id: { source } }, idle?, on?, actions? }` with the limits of
 * limits.ts. Plain zod: the api layer gives it its OpenAPI name.
 *
 * Every per-field limit and every cross-field rule lives here, so a failed parse names the field:
 * strict objects (unknown or mis-cased fields are issues), trimmed texts, id-keyed records whose
 * keys are checked, clip lists, idle weights, and references to undeclared clips.
 *
 * `validateDeclaration` (validate.ts) is the entry point: it also refuses `__proto__` keys in the
 * raw body (JSON.parse keeps them as own keys, zod silently drops them) and turns issues into
 * field-named problems.
 */
import { z } from 'zod';
import {
  ACTION_DESCRIPTION_MAX,
  ASSET_ID_MAX,
  CLIP_LIST_MAX,
  DURATION_MAX_SECONDS,
  DURATION_MIN_SECONDS,
  ID_PATTERN,
  MOTION_PROMPT_MAX,
  SOURCE_MEMBER_ID,
  WEIGHT_MAX,
  WEIGHT_MIN,
  isReservedId,
} from './limits.ts';
import { idleMemberWeights } from '../behavior/idle.ts';

/** A trimmed, nonempty string of at most `max` UTF-16 code units (zod's own max() counts code points). */
function trimmedText(max: number) {
  return z
    .string()
    .trim()
    .min(1, 'must not be empty (after trimming)')
    .max(max, `must be at most ${max} characters`)
    .refine((v) => v.length <= max, `must be at most ${max} characters (UTF-16 code units)`);
}

/** A clip or action id: pattern of the `avatar_clips.clip_id` check, reserved words refused. */
const DeclarationId = z
  .string()
  .regex(ID_PATTERN, 'must be 1 to 64 characters of letters, digits, underscore or hyphen')
  .refine((id) => !isReservedId(id), 'is a reserved id');

const AssetIdInput = trimmedText(ASSET_ID_MAX);
const DeclarationMotionPrompt = trimmedText(MOTION_PROMPT_MAX);
const ActionDescription = trimmedText(ACTION_DESCRIPTION_MAX);
const DurationSeconds = z
  .number()
  .int('must be a whole number of seconds')
  .min(DURATION_MIN_SECONDS, `must be at least ${DURATION_MIN_SECONDS} seconds`)
  .max(DURATION_MAX_SECONDS, `must be at most ${DURATION_MAX_SECONDS} seconds`);
/** zod refuses NaN and ±Infinity for z.number(), so a weight is finite. */
const Weight = z
  .number()
  .min(WEIGHT_MIN, `must be at least ${WEIGHT_MIN}`)
  .max(WEIGHT_MAX, `must be at most ${WEIGHT_MAX}`);

/** A record keyed by clip or action id. A bad key is an issue at `<record>.<key>` with the id rule's message. */
function idRecord<V extends z.ZodType>(value: V, what: 'clip' | 'action') {
  return z.record(DeclarationId, value, {
    error: (iss) => {
      if (iss.code !== 'invalid_key') return undefined;
      const inner = (iss as { issues?: { message: string }[] }).issues?.[0]?.message ?? 'is invalid';
      return `invalid ${what} id: ${inner}`;
    },
  });
}

/**
 * A clip's source: exactly `{ assetId }` (an uploaded video asset) or `{ motionPrompt,
 * durationSeconds? }` (generated from the portrait). Modelled as one strict object whose
 * refinement enforces "exactly one kind", rather than z.union: a union failure names only
 * `...source`, this names `...source.motionPrompt`, `...source.durationSeconds`, and so on.
 */
const SourceInput = z
  .strictObject({
    assetId: AssetIdInput.optional(),
    motionPrompt: DeclarationMotionPrompt.optional(),
    durationSeconds: DurationSeconds.optional(),
  })
  .superRefine((s, ctx) => {
    if (s.assetId !== undefined && s.motionPrompt !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['motionPrompt'],
        message: 'is not allowed with assetId: a source is exactly { assetId } or { motionPrompt, durationSeconds? }',
      });
    } else if (s.assetId !== undefined && s.durationSeconds !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['durationSeconds'],
        message: 'is not allowed with assetId: only generated sources ({ motionPrompt }) have a duration',
      });
    } else if (s.assetId === undefined && s.motionPrompt === undefined) {
      ctx.addIssue({ code: 'custom', path: [], message: 'must be { assetId } or { motionPrompt, durationSeconds? }' });
    }
  })
  .transform((s): SourceBody =>
    s.assetId !== undefined
      ? { assetId: s.assetId }
      : {
          motionPrompt: s.motionPrompt as string,
          ...(s.durationSeconds !== undefined ? { durationSeconds: s.durationSeconds } : {}),
        },
  );

/** A source in the shape of the PUT body. */
export type SourceBody = { assetId: string } | { motionPrompt: string; durationSeconds?: number };

/** A clip list: nonempty, no repeated id, at most 32. Whether each id is declared is checked at the top level. */
const ClipList = z
  .array(z.string())
  .min(1, 'must name at least one clip')
  .max(CLIP_LIST_MAX, `must name at most ${CLIP_LIST_MAX} clips`)
  .superRefine((list, ctx) => {
    const seen = new Map<string, number>();
    list.forEach((id, i) => {
      const first = seen.get(id);
      if (first !== undefined)
        ctx.addIssue({ code: 'custom', path: [i], message: `repeats clip id "${id}" (first at [${first}])` });
      else seen.set(id, i);
    });
  });

const IdleInput = z
  .strictObject({
    clips: ClipList,
    /** Legacy: the authored idle clips' aggregate weight against the source loop's 1. */
    weight: Weight.optional(),
    /** Member id (`source` or an idle clip id) to weight; omitted member = 1, 0 disables. */
    weights: z.record(z.string(), Weight).optional(),
  })
  .superRefine((idle, ctx) => {
    if (idle.weights !== undefined && idle.weight !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['weights'], message: 'cannot be combined with the legacy idle.weight' });
      return;
    }
    if (idle.weights) {
      const pool = new Set([SOURCE_MEMBER_ID, ...idle.clips]);
      for (const key of Object.keys(idle.weights)) {
        if (!pool.has(key)) {
          ctx.addIssue({
            code: 'custom',
            path: ['weights', key],
            message: `is not a member of the idle pool ("${SOURCE_MEMBER_ID}" or an id in idle.clips)`,
          });
          return;
        }
      }
    }
    // The behaviour engine's own weighting decides, so the validator and the engine cannot disagree.
    if (!idleMemberWeights({ idle }).some((m) => m.weight > 0)) {
      ctx.addIssue({
        code: 'custom',
        path: [idle.weights ? 'weights' : 'weight'],
        message: 'leaves no idle member with a positive weight (at least one must stay positive)',
      });
    }
  });

const OnInput = z.strictObject({
  userSpeechStarted: z.strictObject({ clips: ClipList }).optional(),
});

const ActionInput = z.strictObject({ description: ActionDescription, clips: ClipList });

export const DeclarationBodySchema = z
  .strictObject({
    expectedRevision: z.number().int('must be an integer').min(0, 'must be nonnegative'),
    clips: idRecord(z.strictObject({ source: SourceInput }), 'clip'),
    idle: IdleInput.optional(),
    on: OnInput.optional(),
    actions: idRecord(ActionInput, 'action').optional(),
  })
  .superRefine((body, ctx) => {
    const declared = (id: string) => Object.hasOwn(body.clips, id);
    const check = (list: readonly string[], path: (string | number)[]) =>
      list.forEach((id, i) => {
        if (!declared(id))
          ctx.addIssue({
            code: 'custom',
            path: [...path, i],
            message: `names clip "${id}", which is not declared in clips`,
          });
      });
    if (body.idle) check(body.idle.clips, ['idle', 'clips']);
    if (body.on?.userSpeechStarted) check(body.on.userSpeechStarted.clips, ['on', 'userSpeechStarted', 'clips']);
    for (const [actionId, action] of Object.entries(body.actions ?? {}))
      check(action.clips, ['actions', actionId, 'clips']);
  });

/** The PUT body as parsed (trimmed texts; duration not yet defaulted). */
export type DeclarationBody = z.output<typeof DeclarationBodySchema>;
