/**
 * agents-js's log, as an operator reads it next to ours. Its info lines are its own workings (the
 * worker's registration, each job process's start, preemptive generations, rooms deleted), and
 * several carry what the user said or the avatar answered in `lk.pii.*` fields (LiveKit's own mark
 * for personal data): at our default level (info) it logs from warn up, and the `lk.pii.*` fields
 * are left out of every line unless LOG_TRANSCRIPTS is on.
 */
import { initializeLogger, log } from '@livekit/agents';
import { demoteCallEndRaces } from './call-end-races.ts';

/**
 * Every `lk.pii.*` field agents-js 1.9 and its OpenAI and Silero plugins log (transcripts, replies,
 * tool calls, chat contexts, identities, room names). Listed because pino's serializers are per key.
 */
const PII_FIELDS = [
  'agent_name',
  'arguments',
  'audio_transcript',
  'avatar_id',
  'avatar_identity',
  'base_url',
  'call_id',
  'caller_identity',
  'chat_ctx',
  'confirmed_keyterms',
  'data',
  'delegation_id',
  'destination_identity',
  'error',
  'event',
  'expected_identities',
  'incomplete_details',
  'input_text',
  'instructions',
  'keyterms',
  'message',
  'minted_identity',
  'name',
  'new_transcript',
  'output',
  'participant_identity',
  'pending_keyterms',
  'raw_data',
  'reason',
  'removed_keyterms',
  'requested_identity',
  'response',
  'room_name',
  'tool',
  'tool_call',
  'transcript',
  'type',
  'user_input',
  'user_message',
  'user_transcript',
  'ws_data',
].map((f) => `lk.pii.${f}`);

/** agents-js's level for ours: its info lines are internals, so at info it logs warnings and up. */
export function agentsLogLevel(level: string): string {
  if (level === 'silent') return 'fatal';
  return level === 'info' ? 'warn' : level;
}

/** The worker's agents-js logger (its job processes get the same level from it). */
export function initAgentsLogger(o: { level: string; transcripts: boolean }): void {
  initializeLogger({ pretty: false, level: agentsLogLevel(o.level) });
  shapeAgentsLog(o);
}

/**
 * agents-js's lines in this process as an operator should read them: without the user's words
 * unless `transcripts`, and the errors of a call's end that are none (call-end-races.ts) as
 * warnings. Called after agents-js made its logger (a job process: in prewarm).
 */
export function shapeAgentsLog(o: { transcripts: boolean }): void {
  demoteCallEndRaces(log());
  if (!o.transcripts) dropPersonalFields();
}

/**
 * Leaves the `lk.pii.*` fields out of agents-js's lines in this process, those of loggers made
 * already included: they share the root logger's serializers, where a serializer answering
 * undefined leaves its field out. Called after agents-js made its logger (a job process: in prewarm).
 */
function dropPersonalFields(): void {
  const root = log() as unknown as Record<symbol, unknown>;
  let serializers: Record<string, (v: unknown) => unknown> | undefined;
  for (let o: object | null = root; o && !serializers; o = Object.getPrototypeOf(o) as object | null) {
    const sym = Object.getOwnPropertySymbols(o).find((s) => s.description === 'pino.serializers');
    if (sym) serializers = (o as Record<symbol, Record<string, (v: unknown) => unknown>>)[sym];
  }
  if (!serializers) throw new Error("agents-js's logger has no pino serializers: check dropPersonalFields against it");
  for (const field of PII_FIELDS) serializers[field] = () => undefined;
}
