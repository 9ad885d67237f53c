/**
 * RPCs between a call's voice agent and its avatar (both ours), beside LiveKit's avatar protocol
 * (agent/avatar/receiver.ts). The avatar answers only the agent it speaks for.
 */

/** Voice → avatar: `{ "action_id": "..." }` → `{ "accepted": true } | { "accepted": false, "reason": "unknown_action" | "no_available_take" }`. */
export const RPC_PLAY_ACTION = 'avatar.play_action';

/** Voice → avatar: the user started speaking (the voice agent's VAD), so the avatar plays a listening reaction. Payload "". */
export const RPC_USER_SPEECH_STARTED = 'avatar.user_speech_started';

/**
 * Voice → avatar: hold the speech playing (the user spoke over it, and may have made only a noise),
 * keeping what is left of it; `RPC_RESUME_SPEECH` plays it on, `lk.clear_buffer` drops it. Payload "".
 */
export const RPC_PAUSE_SPEECH = 'avatar.pause_speech';
/** Voice → avatar: the held speech plays on from where it stopped. Payload "". */
export const RPC_RESUME_SPEECH = 'avatar.resume_speech';

/**
 * Avatar → voice: the call is over (the user left, it was released, its time ran out); leave the
 * room. The avatar closes a conversation's room once its voice has left: closed under it, LiveKit's
 * Rust SDK in the voice process logged errors (a data channel closed unexpectedly, a failed offer)
 * at the end of calls that went well. Payload "".
 */
export const RPC_CALL_ENDED = 'avatar.call_ended';
