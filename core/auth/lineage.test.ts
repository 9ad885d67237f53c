import { describe, expect, it } from 'vitest';
import { ApiError } from '../platform/errors.ts';
import { assertNests, type ChildTerms, type MinterTerms } from './lineage.ts';

const at = (iso: string) => new Date(iso);
const minter = (o: Partial<MinterTerms> = {}): MinterTerms => ({
  id: 'svc_parent',
  scopes: ['*'],
  spendLimitCreditMicros: null,
  expiresAt: null,
  ...o,
});
const child = (o: Partial<ChildTerms> = {}): ChildTerms => ({
  scopes: ['credits:read'],
  spendLimitCreditMicros: null,
  expiresAt: null,
  ...o,
});

function refusal(m: MinterTerms, c: ChildTerms): { field: unknown; status: number } | undefined {
  try {
    assertNests(m, c);
    return undefined;
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return { field: err.extra.field, status: err.status };
  }
}

describe('assertNests: a minted key inside its minter', () => {
  it('happy: anything goes under an unlimited, never-expiring "*" key', () => {
    expect(refusal(minter(), child({ scopes: ['*'] }))).toBeUndefined();
    expect(
      refusal(minter(), child({ spendLimitCreditMicros: 5, expiresAt: at('2100-01-01T00:00:00Z') })),
    ).toBeUndefined();
  });

  it('security: scopes are a subset of the minter\'s, "*" only from "*"', () => {
    const m = minter({ scopes: ['api_keys:write', 'credits:read'] });
    expect(refusal(m, child({ scopes: ['credits:read', 'api_keys:write'] }))).toBeUndefined();
    expect(refusal(m, child({ scopes: ['avatars:write'] }))).toEqual({ field: 'scopes', status: 403 });
    expect(refusal(m, child({ scopes: ['*'] }))).toEqual({ field: 'scopes', status: 403 });
  });

  it("security: under a spend-limited minter the limit is required and at most the minter's", () => {
    const m = minter({ spendLimitCreditMicros: 3_000_000 });
    expect(refusal(m, child({ spendLimitCreditMicros: 3_000_000 }))).toBeUndefined();
    expect(refusal(m, child({ spendLimitCreditMicros: 0 }))).toBeUndefined();
    expect(refusal(m, child({ spendLimitCreditMicros: 3_000_001 }))).toEqual({
      field: 'spendLimitCreditMicros',
      status: 403,
    });
    expect(refusal(m, child({ spendLimitCreditMicros: null }))).toEqual({
      field: 'spendLimitCreditMicros',
      status: 403,
    });
  });

  it("security: under an expiring minter the expiry is required and no later than the minter's", () => {
    const m = minter({ expiresAt: at('2030-01-01T00:00:00Z') });
    expect(refusal(m, child({ expiresAt: at('2030-01-01T00:00:00Z') }))).toBeUndefined();
    expect(refusal(m, child({ expiresAt: at('2029-06-01T00:00:00Z') }))).toBeUndefined();
    expect(refusal(m, child({ expiresAt: at('2030-01-01T00:00:00.001Z') }))).toEqual({
      field: 'expiresAt',
      status: 403,
    });
    expect(refusal(m, child({ expiresAt: null }))).toEqual({ field: 'expiresAt', status: 403 });
  });
});
