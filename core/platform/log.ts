import pino from 'pino';

/**
 * One structured logger. Messages are static; details go in fields. Anything that might carry a
 * secret is redacted by path, so a key can never reach the logs even by accident.
 */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info') {
  return pino({
    level,
    base: { pid: process.pid },
    redact: {
      paths: [
        'authorization',
        '*.authorization',
        'headers.authorization',
        '*.headers.authorization',
        'apiKey',
        '*.apiKey',
        'secret',
        '*.secret',
        'password',
        '*.password',
        // The dashboard's session cookie and sign-in tokens.
        'cookie',
        '*.cookie',
        'headers.cookie',
        '*.headers.cookie',
        'token',
        '*.token',
      ],
      censor: '[redacted]',
    },
  });
}

export type Logger = pino.Logger;
