import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

function configError(env: Record<string, string>): ConfigError {
  let caught: unknown;
  try {
    loadConfig(env);
  } catch (err) {
    caught = err;
  }
  expect(caught, 'expected loadConfig to throw').toBeInstanceOf(ConfigError);
  return caught as ConfigError;
}

describe('configuration from the environment', () => {
  it('has working defaults for an empty environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      NODE_ENV: 'development',
      PORT: 8080,
      HOST: '0.0.0.0',
      LOG_LEVEL: 'info',
      DATABASE_POOL_SIZE: 10,
      RATE_LIMIT_POINTS: 120,
      RATE_LIMIT_WINDOW_SECONDS: 60,
      BILLING_URL: '/platform/billing',
      publicBaseUrl: 'http://localhost:8080',
    });
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.REDIS_URL).toBeUndefined();
    expect(c.LIVEKIT_URL).toBeUndefined();
    expect(c.dataDir).toBe(path.resolve('./data'));
    expect(path.isAbsolute(c.dataDir)).toBe(true);
  });

  it('puts metrics and the worker health endpoint on ports of their own, 0 turning metrics off, and keeps transcripts out of logs', () => {
    expect(loadConfig({})).toMatchObject({
      METRICS_PORT: 9464,
      AGENT_METRICS_PORT: 9465,
      AGENT_HEALTH_PORT: 8081,
      LOG_TRANSCRIPTS: false,
    });
    expect(loadConfig({ METRICS_PORT: '0', AGENT_METRICS_PORT: '', LOG_TRANSCRIPTS: 'true' })).toMatchObject({
      METRICS_PORT: 0,
      AGENT_METRICS_PORT: 9465,
      LOG_TRANSCRIPTS: true,
    });
    expect(configError({ METRICS_PORT: '70000' }).message).toContain('METRICS_PORT');
    expect(configError({ LOG_TRANSCRIPTS: 'yes' }).message).toContain('LOG_TRANSCRIPTS');
  });

  it('reads and coerces values that are set', () => {
    const c = loadConfig({
      PORT: '9001',
      LOG_LEVEL: 'debug',
      DATABASE_URL: 'postgres://u:p@db:5432/avatars',
      REDIS_URL: 'redis://cache:6379',
      RATE_LIMIT_POINTS: '10',
      DATA_DIR: '/var/lib/avatars',
      PUBLIC_BASE_URL: 'https://avatars.example.com/',
    });
    expect(c).toMatchObject({
      PORT: 9001,
      LOG_LEVEL: 'debug',
      DATABASE_URL: 'postgres://u:p@db:5432/avatars',
      REDIS_URL: 'redis://cache:6379',
      RATE_LIMIT_POINTS: 10,
      dataDir: '/var/lib/avatars',
      publicBaseUrl: 'https://avatars.example.com',
    });
  });

  it('the public base URL defaults to localhost on the configured port', () => {
    expect(loadConfig({ PORT: '3000' }).publicBaseUrl).toBe('http://localhost:3000');
  });

  it('treats a variable set to the empty string as unset', () => {
    const c = loadConfig({
      DATABASE_URL: '',
      REDIS_URL: '',
      PUBLIC_BASE_URL: '',
      LIVEKIT_URL: '',
      PORT: '',
      RATE_LIMIT_POINTS: '',
      DATABASE_POOL_SIZE: '',
    });
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.REDIS_URL).toBeUndefined();
    expect(c.PORT).toBe(8080);
    expect(c.RATE_LIMIT_POINTS).toBe(120);
    expect(c.DATABASE_POOL_SIZE).toBe(10);
    expect(c.publicBaseUrl).toBe('http://localhost:8080');
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '80.5'],
    ['DATABASE_URL', 'not-a-url'],
    ['REDIS_URL', 'localhost'],
    ['PUBLIC_BASE_URL', 'example.com'],
    ['LOG_LEVEL', 'loud'],
    ['NODE_ENV', 'staging'],
    ['DATABASE_POOL_SIZE', '0'],
    ['RATE_LIMIT_POINTS', '-1'],
    ['RATE_LIMIT_WINDOW_SECONDS', 'soon'],
  ])('refuses %s=%s with a ConfigError naming the variable', (name, value) => {
    const err = configError({ [name]: value });
    expect(err.name).toBe('ConfigError');
    expect(err.message).toContain(name);
  });

  it('names every bad variable at once', () => {
    const err = configError({ PORT: 'abc', LOG_LEVEL: 'loud', DATABASE_URL: 'not-a-url' });
    for (const name of ['PORT', 'LOG_LEVEL', 'DATABASE_URL']) expect(err.message).toContain(name);
  });

  it('requires LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET together', () => {
    const partials: Record<string, string>[] = [
      { LIVEKIT_URL: 'ws://livekit:7880' },
      { LIVEKIT_API_KEY: 'key' },
      { LIVEKIT_URL: 'ws://livekit:7880', LIVEKIT_API_KEY: 'key' },
      { LIVEKIT_API_KEY: 'key', LIVEKIT_API_SECRET: 'secret' },
    ];
    for (const partial of partials) {
      const err = configError(partial);
      for (const name of ['LIVEKIT_URL', 'LIVEKIT_API_KEY', 'LIVEKIT_API_SECRET']) expect(err.message).toContain(name);
    }
    const full = loadConfig({ LIVEKIT_URL: 'ws://livekit:7880', LIVEKIT_API_KEY: 'key', LIVEKIT_API_SECRET: 'secret' });
    expect(full).toMatchObject({
      LIVEKIT_URL: 'ws://livekit:7880',
      LIVEKIT_API_KEY: 'key',
      LIVEKIT_API_SECRET: 'secret',
    });
  });

  it('refuses a LiveKit URL that is not a URL even when all three are set', () => {
    const err = configError({ LIVEKIT_URL: 'livekit', LIVEKIT_API_KEY: 'key', LIVEKIT_API_SECRET: 'secret' });
    expect(err.message).toContain('LIVEKIT_URL');
  });

  it('scenes and recordings: documented defaults, and bad values refused naming the variable', () => {
    expect(loadConfig({})).toMatchObject({
      SCENE_TTL_SECONDS: 604_800,
      SCENE_MAX_BYTES: 100_000_000,
      SCENE_MAX_SECONDS: 60,
      SCENE_FRAME_SIZE: 512,
      RECORDING_FINALIZE_TIMEOUT_SECONDS: 1800,
      MEDIA_SWEEP_SECONDS: 300,
    });
    expect(loadConfig({ SCENE_FRAME_SIZE: '720', SCENE_TTL_SECONDS: '' })).toMatchObject({
      SCENE_FRAME_SIZE: 720,
      SCENE_TTL_SECONDS: 604_800,
    });
    expect(configError({ SCENE_FRAME_SIZE: '513' }).message).toMatch(/SCENE_FRAME_SIZE: must be even/);
    expect(configError({ SCENE_TTL_SECONDS: '10' }).message).toMatch(/SCENE_TTL_SECONDS/);
    expect(configError({ SCENE_MAX_SECONDS: 'long' }).message).toMatch(/SCENE_MAX_SECONDS/);
    expect(configError({ MEDIA_SWEEP_SECONDS: '0' }).message).toMatch(/MEDIA_SWEEP_SECONDS/);
  });

  it('reads the live-call fault limits, with defaults and bounds', () => {
    expect(loadConfig({})).toMatchObject({ STT_TIMEOUT_SECONDS: 15, LIVE_HEARTBEAT_TIMEOUT_SECONDS: 60 });
    expect(loadConfig({ STT_TIMEOUT_SECONDS: '3', LIVE_HEARTBEAT_TIMEOUT_SECONDS: '6' })).toMatchObject({
      STT_TIMEOUT_SECONDS: 3,
      LIVE_HEARTBEAT_TIMEOUT_SECONDS: 6,
    });
    for (const [name, value] of [
      ['STT_TIMEOUT_SECONDS', '0'],
      ['STT_TIMEOUT_SECONDS', '301'],
      ['LIVE_HEARTBEAT_TIMEOUT_SECONDS', '2'],
      ['LIVE_HEARTBEAT_TIMEOUT_SECONDS', 'soon'],
    ]) {
      expect(configError({ [name!]: value! }).message).toContain(name);
    }
  });

  it('reads the live-call audio latency settings, with defaults and bounds', () => {
    expect(loadConfig({})).toMatchObject({ AGENT_AUDIO_QUEUE_MS: 100, AGENT_SPEECH_START_MS: 100 });
    expect(loadConfig({ AGENT_AUDIO_QUEUE_MS: '60', AGENT_SPEECH_START_MS: '0' })).toMatchObject({
      AGENT_AUDIO_QUEUE_MS: 60,
      AGENT_SPEECH_START_MS: 0,
    });
    for (const [name, value] of [
      ['AGENT_AUDIO_QUEUE_MS', '65'],
      ['AGENT_AUDIO_QUEUE_MS', '10'],
      ['AGENT_AUDIO_QUEUE_MS', '1010'],
      ['AGENT_SPEECH_START_MS', '-1'],
      ['AGENT_SPEECH_START_MS', 'soon'],
    ]) {
      expect(configError({ [name!]: value! }).message).toContain(name);
    }
    expect(configError({ AGENT_AUDIO_QUEUE_MS: '65' }).message).toContain('multiple of 10');
  });

  it("reads when a live call takes the user's turn as ended, with defaults, switches and bounds", () => {
    expect(loadConfig({})).toMatchObject({
      AGENT_STT_SILENCE_MS: 96,
      AGENT_QUESTION_TURN_MS: 192,
      AGENT_USER_AUDIO_FRAME_MS: 30,
      AGENT_TURN_END_MS: 700,
      AGENT_PREEMPTIVE_TTS: true,
      AGENT_TTS_CLAUSES: true,
    });
    expect(
      loadConfig({
        AGENT_STT_SILENCE_MS: '550',
        AGENT_USER_AUDIO_FRAME_MS: '10',
        AGENT_TURN_END_MS: '',
        AGENT_PREEMPTIVE_TTS: 'false',
        AGENT_TTS_CLAUSES: 'false',
      }),
    ).toMatchObject({
      AGENT_STT_SILENCE_MS: 550,
      AGENT_USER_AUDIO_FRAME_MS: 10,
      AGENT_TURN_END_MS: 700,
      AGENT_PREEMPTIVE_TTS: false,
      AGENT_TTS_CLAUSES: false,
    });
    for (const [name, value] of [
      ['AGENT_STT_SILENCE_MS', '50'],
      ['AGENT_USER_AUDIO_FRAME_MS', '25'],
      ['AGENT_USER_AUDIO_FRAME_MS', '0'],
      ['AGENT_TURN_END_MS', '-1'],
      ['AGENT_PREEMPTIVE_TTS', 'yes'],
      ['AGENT_TTS_CLAUSES', '0'],
    ]) {
      expect(configError({ [name!]: value! }).message).toContain(name);
    }
  });

  it('publishes live video as H.264 unless told VP8, and refuses any other codec', () => {
    expect(loadConfig({})).toMatchObject({ AGENT_VIDEO_CODEC: 'h264' });
    expect(loadConfig({ AGENT_VIDEO_CODEC: 'vp8' })).toMatchObject({ AGENT_VIDEO_CODEC: 'vp8' });
    expect(configError({ AGENT_VIDEO_CODEC: 'av1' }).message).toContain('AGENT_VIDEO_CODEC');
  });

  it('draws live mouths in two threads unless told otherwise, at least one', () => {
    expect(loadConfig({})).toMatchObject({ AGENT_LIPSYNC_THREADS: 2 });
    expect(loadConfig({ AGENT_LIPSYNC_THREADS: '1' })).toMatchObject({ AGENT_LIPSYNC_THREADS: 1 });
    for (const bad of ['0', '65', 'many'])
      expect(configError({ AGENT_LIPSYNC_THREADS: bad }).message).toContain('AGENT_LIPSYNC_THREADS');
  });

  it('reads the realtime turn settings, with defaults and bounds', () => {
    expect(loadConfig({})).toMatchObject({
      TURN_TALK_MAX_SECONDS: 60,
      LLM_TIMEOUT_SECONDS: 20,
      REALTIME_MEDIA_CACHE_SIZE: 16,
    });
    expect(
      loadConfig({ TURN_TALK_MAX_SECONDS: '120', LLM_TIMEOUT_SECONDS: '5', REALTIME_MEDIA_CACHE_SIZE: '2' }),
    ).toMatchObject({
      TURN_TALK_MAX_SECONDS: 120,
      LLM_TIMEOUT_SECONDS: 5,
      REALTIME_MEDIA_CACHE_SIZE: 2,
    });
    for (const [name, value] of [
      ['TURN_TALK_MAX_SECONDS', '4'],
      ['TURN_TALK_MAX_SECONDS', '601'],
      ['LLM_TIMEOUT_SECONDS', '0'],
      ['REALTIME_MEDIA_CACHE_SIZE', '0'],
      ['REALTIME_MEDIA_CACHE_SIZE', 'many'],
    ]) {
      expect(configError({ [name!]: value! }).message).toContain(name);
    }
  });

  it('reads the bounds on slow requests, with defaults and bounds; a head may not outlast the whole request', () => {
    expect(loadConfig({})).toMatchObject({
      HTTP_HEADERS_TIMEOUT_SECONDS: 10,
      HTTP_REQUEST_TIMEOUT_SECONDS: 900,
      HTTP_BODY_STALL_SECONDS: 10,
      HTTP_BODY_MIN_BYTES_PER_SECOND: 500,
    });
    expect(
      loadConfig({
        HTTP_HEADERS_TIMEOUT_SECONDS: '20',
        HTTP_REQUEST_TIMEOUT_SECONDS: '20',
        HTTP_BODY_STALL_SECONDS: '5',
        HTTP_BODY_MIN_BYTES_PER_SECOND: '0',
      }),
    ).toMatchObject({
      HTTP_HEADERS_TIMEOUT_SECONDS: 20,
      HTTP_REQUEST_TIMEOUT_SECONDS: 20,
      HTTP_BODY_STALL_SECONDS: 5,
      HTTP_BODY_MIN_BYTES_PER_SECOND: 0,
    });
    for (const [name, value] of [
      ['HTTP_HEADERS_TIMEOUT_SECONDS', '0'],
      ['HTTP_REQUEST_TIMEOUT_SECONDS', 'long'],
      ['HTTP_BODY_STALL_SECONDS', '0'],
      ['HTTP_BODY_MIN_BYTES_PER_SECOND', '-1'],
    ]) {
      expect(configError({ [name!]: value! }).message).toContain(name);
    }
    expect(configError({ HTTP_HEADERS_TIMEOUT_SECONDS: '60', HTTP_REQUEST_TIMEOUT_SECONDS: '30' }).message).toMatch(
      /HTTP_HEADERS_TIMEOUT_SECONDS must not exceed HTTP_REQUEST_TIMEOUT_SECONDS/,
    );
  });
});
