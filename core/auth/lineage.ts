import { ApiError } from '../platform/errors.ts';
import { hasScope, type Scope } from './keys.ts';

/**
 * What a minting key allows a key it mints: its scopes, and its chain's tightest spend limit and
 * earliest expiry (its own, and those of the keys above it).
 */
export interface MinterTerms {
  id: string;
  scopes: readonly string[];
  spendLimitCreditMicros: number | null;
  expiresAt: Date | null;
}

/** What the new key asks for. */
export interface ChildTerms {
  scopes: readonly Scope[];
  spendLimitCreditMicros: number | null;
  expiresAt: Date | null;
}

/**
 * A minted key nests inside its minter: no scope the minter lacks, a spend limit no higher than the
 * minter's (none only from an unlimited minter), an expiry no later than the minter's (none only from
 * a minter that never expires). Refused, not clamped: a key silently granted less than asked would
 * fail later, far from the request that caused it. 403 forbidden, naming the field.
 */
export function assertNests(minter: MinterTerms, child: ChildTerms): void {
  for (const s of child.scopes) {
    // '*' can only come from '*': hasScope(held, '*') is true only for a minter holding '*'.
    if (!hasScope(minter.scopes, s)) {
      throw new ApiError('forbidden', `Cannot grant scope "${s}": the calling key does not hold it`, {
        field: 'scopes',
      });
    }
  }
  const limit = minter.spendLimitCreditMicros;
  if (limit !== null && (child.spendLimitCreditMicros === null || child.spendLimitCreditMicros > limit)) {
    throw new ApiError(
      'forbidden',
      `The calling key is spend-limited to ${limit} credit micros: the new key needs spendLimitCreditMicros at most that`,
      { field: 'spendLimitCreditMicros' },
    );
  }
  const until = minter.expiresAt;
  if (until !== null && (child.expiresAt === null || child.expiresAt.getTime() > until.getTime())) {
    throw new ApiError(
      'forbidden',
      `The calling key expires at ${until.toISOString()}: the new key needs expiresAt at or before that`,
      { field: 'expiresAt' },
    );
  }
}
