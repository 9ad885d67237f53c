import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Principal } from '../core/auth/key-store.ts';
import type { Services } from '../core/wiring/services.ts';

/** What every handler can read from the Hono context. */
export interface AppEnv {
  Variables: {
    services: Services;
    requestId: string;
    /** Set by the auth guard on every authenticated route. */
    principal: Principal;
  };
}

export type App = OpenAPIHono<AppEnv>;

/** Every endpoint lives under this prefix: the major version is in the path (docs/api.md, "Versioning"). */
export const V1 = '/api/v1' as const;
