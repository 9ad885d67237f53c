export * from './limits.ts';
export * from './schema.ts';
export * from './validate.ts';
export * from './plan.ts';
export * from './round-trip.ts';
