import type { RouteConfig } from '@hono/zod-openapi';
import type { App } from '../context.ts';
import * as createApiKey from './api-keys/create-key.ts';
import * as getCreditBalance from './credits/get-balance.ts';
import * as listSessionUsage from './usage/list-sessions.ts';

export interface RouteModule {
  route: RouteConfig;
  register(app: App): void;
}

/** Every /api/v1 route. Adding a route means adding its module here. */
export const ROUTES: RouteModule[] = [getCreditBalance, listSessionUsage, createApiKey];
