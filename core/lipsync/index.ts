export { LipsyncService } from './service.ts';
