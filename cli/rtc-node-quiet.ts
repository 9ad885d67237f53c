/**
 * Imported first by the CLI that joins calls (before rtc-node loads). rtc-node logs at debug level
 * unless NODE_ENV is `production` when it loads, and does not export its logger: a user joining a
 * call from the terminal got a JSON line for every data stream rtc-node ignored (agents-js sends
 * the user `lk.agent.session` streams) between the CLI's own lines. A NODE_ENV you set is kept.
 */
process.env.NODE_ENV ??= 'production';
