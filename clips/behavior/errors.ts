/**
 * Typed outcomes of the idle pool. The engine is pure and does not depend on the API's error
 * table; the mint maps `ClipLibraryNotReady` to 503 `clip_library_not_ready` (retryable).
 */

/**
 * No idle member can play yet, but one will: the source loop is disabled (weight 0 or not ready)
 * and every positive member that can still become playable is pending.
 */
export class ClipLibraryNotReady extends Error {
  readonly code = 'clip_library_not_ready' as const;
  readonly status = 503 as const;
  readonly retryable = true as const;
  constructor(readonly pendingMembers: readonly string[]) {
    super(`Clip library not ready: idle members still pending (${pendingMembers.join(', ')})`);
    this.name = 'ClipLibraryNotReady';
  }
}

/**
 * No idle member can ever play under this declaration: every positive member failed or was
 * retired (and the source is weighted 0 or unavailable without being pending). Not retryable;
 * the avatar owner must redeclare the clip library.
 */
export class IdlePoolExhausted extends Error {
  readonly code = 'idle_pool_exhausted' as const;
  readonly retryable = false as const;
  constructor(readonly positiveMembers: readonly string[]) {
    super(`No playable idle member: positive members failed or retired (${positiveMembers.join(', ') || 'none'})`);
    this.name = 'IdlePoolExhausted';
  }
}
