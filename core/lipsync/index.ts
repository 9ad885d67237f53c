export { LipsyncService } from './service.ts';
export type { LipsyncRequest, LipsyncResult } from './service.ts';
