/**
 * Setup file for the realtime tests: rtc-node logs at debug level (one JSON line per ignored data
 * stream, per connect callback) unless NODE_ENV is `production` when it is first loaded, and its
 * logger is not exported. Those lines flooded CI's log and pushed the failures out of its tail, so
 * the test process loads it once as production would, then puts NODE_ENV back for everything else.
 */
const previous = process.env.NODE_ENV;
process.env.NODE_ENV = 'production';
try {
  await import('@livekit/rtc-node');
} finally {
  if (previous === undefined) delete process.env.NODE_ENV;
  else process.env.NODE_ENV = previous;
}
