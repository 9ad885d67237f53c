/* global WebAssembly */
// Worker thread that runs the Flite command-line program (flite.wasm, WASI preview1) off the main thread.
// Plain JavaScript on purpose: a worker loads its file with Node's own loader, without the TypeScript hooks
// of tsx or vitest, so this file must run as is. The typed side is flite.ts.
//
// Protocol: workerData = { module: WebAssembly.Module }.
//   in:  { id, args: string[] }   argv after "flite"; output files go under /out (e.g. -o /out/out.wav)
//   out: { id, ok: true, exitCode, wav: Uint8Array | null, stdout, stderr, runMs }  (wav = /out/out.wav)
//        { id, ok: false, message }
//
// WASI is provided by the small in-memory implementation below, not node:wasi: on Node 20.20 node:wasi
// aborts the whole process (uv_mutex_destroy in uvwasi_fd_table_free, from ~WASI during garbage collection)
// after a few dozen runs, and it needs real files for stdout and the WAV. flite needs only 13 calls
// (args, clock, stdio writes, one preopened directory, creating and writing one file), all here.
//
// A WASI program's _start runs once per instance, so every call gets a fresh instance; one spare instance is
// instantiated ahead of time while idle, and its arguments are supplied when it runs.
import { performance } from 'node:perf_hooks';
import { TextDecoder, TextEncoder } from 'node:util';
import { parentPort, workerData } from 'node:worker_threads';

const module = workerData.module;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const ESUCCESS = 0;
const EBADF = 8;
const EINVAL = 28;
const EIO = 29;
const ENOENT = 44;
const ESPIPE = 70;
const FILETYPE_DIRECTORY = 3;
const FILETYPE_REGULAR_FILE = 4;
const OFLAGS_CREAT = 1;
const OFLAGS_TRUNC = 8;
const ALL_RIGHTS = 0xffffffffffffffffn;
const PREOPEN = '/out';
const MAX_FILE_BYTES = 256 * 1024 * 1024;

class ExitSignal {
  constructor(code) {
    this.code = code;
  }
}

/** A growable byte buffer with a write position (stdout, stderr and created files). */
class Sink {
  constructor() {
    this.bytes = new Uint8Array(1024);
    this.length = 0;
    this.pos = 0;
  }
  write(chunk) {
    const end = this.pos + chunk.length;
    if (end > MAX_FILE_BYTES) return false;
    if (end > this.bytes.length) {
      const grown = new Uint8Array(Math.max(end, this.bytes.length * 2));
      grown.set(this.bytes.subarray(0, this.length));
      this.bytes = grown;
    }
    this.bytes.set(chunk, this.pos);
    this.pos = end;
    this.length = Math.max(this.length, end);
    return true;
  }
  contents() {
    return this.bytes.slice(0, this.length);
  }
}

function prepare() {
  /** @type {WebAssembly.Memory | null} */
  let memory = null;
  let argv = [encoder.encode('flite')];
  const files = new Map(); // path under /out -> Sink
  const stdout = new Sink();
  const stderr = new Sink();
  // fd -> { kind: 'stdin' | 'sink' | 'dir', sink? }
  const fds = new Map([
    [0, { kind: 'stdin' }],
    [1, { kind: 'sink', sink: stdout, seekable: false }],
    [2, { kind: 'sink', sink: stderr, seekable: false }],
    [3, { kind: 'dir' }],
  ]);
  let nextFd = 4;
  const view = () => new DataView(memory.buffer);
  const bytes = () => new Uint8Array(memory.buffer);

  const wasi = {
    args_sizes_get(argcPtr, bufSizePtr) {
      view().setUint32(argcPtr, argv.length, true);
      view().setUint32(
        bufSizePtr,
        argv.reduce((n, a) => n + a.length + 1, 0),
        true,
      );
      return ESUCCESS;
    },
    args_get(argvPtr, bufPtr) {
      const v = view();
      const b = bytes();
      let p = bufPtr;
      argv.forEach((a, i) => {
        v.setUint32(argvPtr + 4 * i, p, true);
        b.set(a, p);
        b[p + a.length] = 0;
        p += a.length + 1;
      });
      return ESUCCESS;
    },
    clock_time_get(_id, _precision, timePtr) {
      view().setBigUint64(timePtr, BigInt(Date.now()) * 1000000n, true);
      return ESUCCESS;
    },
    fd_prestat_get(fd, bufPtr) {
      if (fd !== 3) return EBADF;
      view().setUint8(bufPtr, 0);
      view().setUint32(bufPtr + 4, PREOPEN.length, true);
      return ESUCCESS;
    },
    fd_prestat_dir_name(fd, pathPtr, pathLen) {
      if (fd !== 3) return EBADF;
      bytes().set(encoder.encode(PREOPEN).subarray(0, pathLen), pathPtr);
      return ESUCCESS;
    },
    fd_fdstat_get(fd, statPtr) {
      const f = fds.get(fd);
      if (!f) return EBADF;
      const v = view();
      v.setUint8(statPtr, f.kind === 'dir' ? FILETYPE_DIRECTORY : FILETYPE_REGULAR_FILE);
      v.setUint16(statPtr + 2, 0, true);
      v.setBigUint64(statPtr + 8, ALL_RIGHTS, true);
      v.setBigUint64(statPtr + 16, ALL_RIGHTS, true);
      return ESUCCESS;
    },
    fd_fdstat_set_flags(fd) {
      return fds.has(fd) ? ESUCCESS : EBADF;
    },
    fd_close(fd) {
      return fds.delete(fd) ? ESUCCESS : EBADF;
    },
    fd_write(fd, iovsPtr, iovsLen, nwrittenPtr) {
      const f = fds.get(fd);
      if (!f) return EBADF;
      if (f.kind !== 'sink') return EBADF;
      const v = view();
      let n = 0;
      for (let i = 0; i < iovsLen; i++) {
        const ptr = v.getUint32(iovsPtr + 8 * i, true);
        const len = v.getUint32(iovsPtr + 8 * i + 4, true);
        if (!f.sink.write(new Uint8Array(memory.buffer, ptr, len))) return EIO;
        n += len;
      }
      v.setUint32(nwrittenPtr, n, true);
      return ESUCCESS;
    },
    fd_read(fd, _iovsPtr, _iovsLen, nreadPtr) {
      const f = fds.get(fd);
      if (!f) return EBADF;
      if (f.kind !== 'stdin') return EBADF; // created files are write-only for flite's purposes
      view().setUint32(nreadPtr, 0, true);
      return ESUCCESS;
    },
    fd_seek(fd, offset, whence, newOffsetPtr) {
      const f = fds.get(fd);
      if (!f) return EBADF;
      if (f.kind !== 'sink' || !f.seekable) return ESPIPE;
      const base = whence === 0 ? 0 : whence === 1 ? f.sink.pos : whence === 2 ? f.sink.length : -1;
      const pos = base + Number(offset);
      if (base < 0 || pos < 0 || pos > MAX_FILE_BYTES) return EINVAL;
      f.sink.pos = pos;
      view().setBigUint64(newOffsetPtr, BigInt(pos), true);
      return ESUCCESS;
    },
    path_open(dirFd, _dirflags, pathPtr, pathLen, oflags, _rightsBase, _rightsInheriting, _fdflags, fdPtr) {
      if (fds.get(dirFd)?.kind !== 'dir') return EBADF;
      const path = decoder.decode(new Uint8Array(memory.buffer, pathPtr, pathLen));
      if (path.includes('..') || path.startsWith('/')) return ENOENT;
      let sink = files.get(path);
      if (!sink) {
        if (!(oflags & OFLAGS_CREAT)) return ENOENT;
        sink = new Sink();
        files.set(path, sink);
      } else if (oflags & OFLAGS_TRUNC) {
        sink.length = 0;
      }
      sink.pos = 0;
      const fd = nextFd++;
      fds.set(fd, { kind: 'sink', sink, seekable: true });
      view().setUint32(fdPtr, fd, true);
      return ESUCCESS;
    },
    proc_exit(code) {
      throw new ExitSignal(code);
    },
  };

  const instance = new WebAssembly.Instance(module, { wasi_snapshot_preview1: wasi });
  memory = instance.exports.memory;

  return {
    run(args) {
      argv = ['flite', ...args].map((a) => encoder.encode(a));
      let exitCode = 0;
      try {
        instance.exports._start();
      } catch (err) {
        if (!(err instanceof ExitSignal)) throw err;
        exitCode = err.code;
      }
      const wav = files.get('out.wav');
      return {
        exitCode,
        wav: wav ? wav.contents() : null,
        stdout: decoder.decode(stdout.contents()),
        stderr: decoder.decode(stderr.contents()),
      };
    },
  };
}

/** @type {ReturnType<typeof prepare> | null} */
let spare = null;

parentPort.on('message', (msg) => {
  if (msg && msg.type === 'close') {
    parentPort.close();
    return;
  }
  const { id, args } = msg;
  try {
    const job = spare ?? prepare();
    spare = null;
    const t0 = performance.now();
    const r = job.run(args);
    const runMs = performance.now() - t0;
    parentPort.postMessage({ id, ok: true, ...r, runMs }, r.wav ? [r.wav.buffer] : []);
  } catch (err) {
    parentPort.postMessage({ id, ok: false, message: err instanceof Error ? err.message : String(err) });
  }
  // Instantiate the next call's instance while idle, so a call pays only for synthesis.
  try {
    spare = prepare();
  } catch {
    spare = null;
  }
});

spare = prepare();
