// node:fs and node:fs/promises as workerd's nodejs_compat gives them: a virtual file system in
// memory, never the host's disk. /bundle holds the Worker's modules, read-only; /tmp is
// writable and belongs to one request (each request starts with an empty one, and it is
// dropped when the request ends); /dev has null, zero, full and random. Error codes,
// messages, modes and workerd's quirks (fixed timestamps, an existing directory accepted by
// mkdir, rm of a missing path accepted) are the ones wrangler dev gave (compat/projects/node).
// Everything runs synchronously in the isolate; the callback and promise forms wrap it.
"use strict";
(() => {
  const modules = globalThis.__celld_builtin_modules;
  const host = globalThis.__celld_host;
  const { Buffer } = globalThis.__celld_node.buffer;
  const stream = modules["node:stream"];
  const bundleFiles = globalThis.__celld_bundle_files || {};
  delete globalThis.__celld_bundle_files;

  const S_IFREG = 0o100000, S_IFDIR = 0o040000, S_IFCHR = 0o020000, S_IFLNK = 0o120000;
  const constants = Object.freeze({
    UV_FS_SYMLINK_DIR: 1, UV_FS_SYMLINK_JUNCTION: 2, O_RDONLY: 0, O_WRONLY: 1, O_RDWR: 2,
    UV_DIRENT_UNKNOWN: 0, UV_DIRENT_FILE: 1, UV_DIRENT_DIR: 2, UV_DIRENT_LINK: 3,
    UV_DIRENT_FIFO: 4, UV_DIRENT_SOCKET: 5, UV_DIRENT_CHAR: 6, UV_DIRENT_BLOCK: 7,
    S_IFMT: 0o170000, S_IFREG, S_IFDIR, S_IFCHR, S_IFBLK: 0o060000, S_IFIFO: 0o010000,
    S_IFLNK, S_IFSOCK: 0o140000, O_CREAT: 64, O_EXCL: 128, UV_FS_O_FILEMAP: 0, O_NOCTTY: 256,
    O_TRUNC: 512, O_APPEND: 1024, O_DIRECTORY: 65536, O_NOATIME: 262144, O_NOFOLLOW: 131072,
    O_SYNC: 1052672, O_DSYNC: 4096, O_DIRECT: 16384, O_NONBLOCK: 2048, S_IRWXU: 448,
    S_IRUSR: 256, S_IWUSR: 128, S_IXUSR: 64, S_IRWXG: 56, S_IRGRP: 32, S_IWGRP: 16, S_IXGRP: 8,
    S_IRWXO: 7, S_IROTH: 4, S_IWOTH: 2, S_IXOTH: 1, F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1,
    UV_FS_COPYFILE_EXCL: 1, COPYFILE_EXCL: 1, UV_FS_COPYFILE_FICLONE: 2, COPYFILE_FICLONE: 2,
    UV_FS_COPYFILE_FICLONE_FORCE: 4, COPYFILE_FICLONE_FORCE: 4,
  });

  // -- errors, worded as workerd's ------------------------------------------------------------

  const MESSAGES = {
    ENOENT: "no such file or directory", EPERM: "operation not permitted",
    EISDIR: "illegal operation on a directory", ENOTEMPTY: "directory not empty",
    EEXIST: "file already exists", EBADF: "bad file descriptor", ENOTDIR: "not a directory",
    EINVAL: "invalid argument", ELOOP: "too many symbolic links encountered",
  };
  /** An error as workerd's fs throws it: `code`, `syscall`, and the path when it names one. */
  function fail(code, syscall, path = null, message = null) {
    const text = message ?? MESSAGES[code] + (path !== null ? `, ${syscall} '${path}'` : "");
    const error = new Error(text);
    error.code = code;
    error.syscall = syscall;
    if (path !== null) error.path = path;
    throw error;
  }
  function invalid(name, value) {
    const error = new TypeError(`The argument '${name}' is invalid. Received '${value}'`);
    error.code = "ERR_INVALID_ARG_VALUE";
    throw error;
  }
  function unsupported() {
    const error = new Error("The requested operation is unsupported");
    error.code = "ERR_UNSUPPORTED_OPERATION";
    throw error;
  }

  // -- the tree -------------------------------------------------------------------------------

  let nextIno = 1;
  const file = (data, writable = true) => ({ kind: "file", data, writable, ino: nextIno++, atimeMs: 0, mtimeMs: 0 });
  const dir = (writable = true) => ({ kind: "dir", children: new Map(), writable, ino: nextIno++, atimeMs: 0, mtimeMs: 0 });
  const device = (name) => ({ kind: "dev", name, writable: true, ino: nextIno++, atimeMs: 0, mtimeMs: 0 });

  const encoder = new TextEncoder();
  const bundle = dir(false);
  for (const name of Object.keys(bundleFiles)) {
    let at = bundle;
    const parts = name.split("/");
    for (const part of parts.slice(0, -1)) {
      if (!at.children.has(part)) at.children.set(part, dir(false));
      at = at.children.get(part);
    }
    const text = bundleFiles[name];
    at.children.set(parts[parts.length - 1], file(typeof text === "string" ? encoder.encode(text) : text, false));
  }
  const devices = dir(false);
  for (const name of ["null", "zero", "full", "random"]) devices.children.set(name, device(name));

  /** /tmp: emptied once no request that used it is still running. A request's code loses
   * track of its owner after an await, so requests served at once by one isolate share
   * /tmp (under workerd each has its own); one after another, each starts empty. */
  let temp = null;
  const users = new Set();
  function tmp() {
    if (temp === null) {
      temp = dir(true);
      temp.temps = 0;
    }
    const owner = host.owner();
    if (owner !== null && !users.has(owner)) {
      users.add(owner);
      host.onRelease(owner, () => {
        users.delete(owner);
        if (users.size === 0) temp = null;
      });
    }
    return temp;
  }
  function root() {
    const top = dir(false);
    top.children.set("bundle", bundle);
    top.children.set("tmp", tmp());
    top.children.set("dev", devices);
    return top;
  }

  /** The absolute, normalised path of `path` (relative paths are read from /bundle, the cwd). */
  function absolute(path, name = "path") {
    if (path instanceof URL) {
      if (path.protocol !== "file:") invalid(name, path.href);
      path = decodeURIComponent(path.pathname);
    } else if (path instanceof Uint8Array) {
      path = new TextDecoder().decode(path);
    } else if (typeof path !== "string") {
      const error = new TypeError(`The "${name}" argument must be of type string or an instance of Buffer or URL. Received ${path === null ? "null" : typeof path}`);
      error.code = "ERR_INVALID_ARG_TYPE";
      throw error;
    }
    if (path.includes("\u0000")) invalid(name, path);
    const parts = [];
    for (const part of (path.startsWith("/") ? path : `/bundle/${path}`).split("/")) {
      if (part === "" || part === ".") continue;
      if (part === "..") parts.pop();
      else parts.push(part);
    }
    return "/" + parts.join("/");
  }
  const segments = (path) => (path === "/" ? [] : path.slice(1).split("/"));
  const basename = (path) => path.slice(path.lastIndexOf("/") + 1);

  /** The node at absolute `path` (null: none), following symbolic links unless `last` is false
   * for the final one. */
  function lookup(path, follow = true, depth = 0) {
    if (depth > 40) fail("ELOOP", "open", path);
    let at = root();
    const parts = segments(path);
    for (let i = 0; i < parts.length; i++) {
      if (at.kind !== "dir") return null;
      let next = at.children.get(parts[i]);
      if (next === undefined) return null;
      if (next.kind === "link" && (follow || i < parts.length - 1)) {
        const rest = parts.slice(i + 1).join("/");
        return lookup(absolute(next.target + (rest ? "/" + rest : "")), follow, depth + 1);
      }
      at = next;
    }
    return at;
  }
  /** The directory that holds `path` and the name in it; raises as workerd does. */
  function parentOf(path, syscall) {
    const parent = lookup(path.slice(0, path.lastIndexOf("/")) || "/");
    if (parent === null) fail("ENOENT", syscall, basename(path));
    if (parent.kind !== "dir") fail("ENOTDIR", syscall, path);
    return [parent, basename(path)];
  }
  function existing(path, syscall, follow = true) {
    const node = lookup(absolute(path), follow);
    if (node === null) fail("ENOENT", syscall, absolute(path));
    return node;
  }

  // -- Stats and Dirent -----------------------------------------------------------------------

  function modeOf(node) {
    if (node.kind === "dir") return S_IFDIR | (node.writable ? 0o666 : 0o444);
    if (node.kind === "dev") return S_IFCHR | 0o666;
    if (node.kind === "link") return S_IFLNK | 0o666;
    return S_IFREG | (node.writable ? 0o666 : 0o444);
  }
  class Stats {
    constructor(node, bigint = false) {
      const n = bigint ? BigInt : Number;
      this.dev = n(0); this.mode = n(modeOf(node)); this.nlink = n(1); this.uid = n(0);
      this.gid = n(0); this.rdev = n(0); this.blksize = n(0); this.ino = n(node.ino);
      this.size = n(node.kind === "file" ? node.data.length : node.kind === "link" ? node.target.length : 0);
      this.blocks = n(0);
      for (const [key, ms] of [["atime", node.atimeMs], ["mtime", node.mtimeMs], ["ctime", node.mtimeMs], ["birthtime", 0]]) {
        this[key + "Ms"] = bigint ? BigInt(Math.floor(ms)) : ms;
        this[key + "Ns"] = BigInt(Math.floor(ms)) * 1000000n;
        this[key] = new Date(ms);
      }
    }
    isFile() { return (Number(this.mode) & 0o170000) === S_IFREG; }
    isDirectory() { return (Number(this.mode) & 0o170000) === S_IFDIR; }
    isSymbolicLink() { return (Number(this.mode) & 0o170000) === S_IFLNK; }
    isCharacterDevice() { return (Number(this.mode) & 0o170000) === S_IFCHR; }
    isBlockDevice() { return false; }
    isFIFO() { return false; }
    isSocket() { return false; }
  }
  class Dirent {
    constructor(name, node, parentPath) {
      this.name = name;
      this.parentPath = parentPath;
      this._mode = modeOf(node);
    }
    isFile() { return (this._mode & 0o170000) === S_IFREG; }
    isDirectory() { return (this._mode & 0o170000) === S_IFDIR; }
    isSymbolicLink() { return (this._mode & 0o170000) === S_IFLNK; }
    isCharacterDevice() { return (this._mode & 0o170000) === S_IFCHR; }
    isBlockDevice() { return false; }
    isFIFO() { return false; }
    isSocket() { return false; }
  }
  Object.defineProperty(Dirent.prototype, "_mode", { writable: true, enumerable: false, value: 0 });

  // -- file descriptors -----------------------------------------------------------------------

  const FLAGS = {
    r: [true, false, false, false, false], "r+": [true, true, false, false, false],
    rs: [true, false, false, false, false], "rs+": [true, true, false, false, false],
    w: [false, true, true, true, false], wx: [false, true, true, true, true],
    "w+": [true, true, true, true, false], "wx+": [true, true, true, true, true],
    a: [false, true, true, false, false, true], ax: [false, true, true, false, true, true],
    "a+": [true, true, true, false, false, true], "ax+": [true, true, true, false, true, true],
    as: [false, true, true, false, false, true], "as+": [true, true, true, false, false, true],
  };
  function parseFlags(flags = "r") {
    if (typeof flags === "number") {
      const access = flags & 3;
      return {
        read: access !== 1, write: access !== 0, create: Boolean(flags & 64),
        truncate: Boolean(flags & 512), exclusive: Boolean(flags & 128), append: Boolean(flags & 1024),
      };
    }
    const spec = FLAGS[flags];
    if (spec === undefined) invalid("flags", flags);
    const [read, write, create, truncate, exclusive, append = false] = spec;
    return { read, write, create, truncate, exclusive, append };
  }

  const fds = new Map();
  let nextFd = 3;
  function open(path, flags, syscall = "open") {
    const mode = parseFlags(flags);
    const where = absolute(path);
    let node = lookup(where);
    if (node !== null && mode.exclusive && mode.create) fail("EEXIST", syscall);
    if (node === null) {
      if (!mode.create) fail("ENOENT", syscall, where);
      const [parent, name] = parentOf(where, syscall);
      if (!parent.writable) fail("EPERM", syscall);
      node = file(new Uint8Array(0));
      parent.children.set(name, node);
    }
    if (node.kind === "dir" && mode.write) fail("EISDIR", syscall);
    if (mode.write && !node.writable) fail("EPERM", syscall);
    if (mode.truncate && node.kind === "file") node.data = new Uint8Array(0);
    const fd = nextFd++;
    fds.set(fd, { node, mode, position: 0, path: where });
    return fd;
  }
  function entry(fd, syscall) {
    const found = fds.get(fd);
    if (found === undefined) fail("EBADF", syscall);
    return found;
  }
  function bytesOf(data, encoding = "utf8") {
    if (typeof data === "string") return Buffer.from(data, encoding);
    if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (data instanceof ArrayBuffer) return new Uint8Array(data);
    const error = new TypeError('The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView.');
    error.code = "ERR_INVALID_ARG_TYPE";
    throw error;
  }
  /** Write `bytes` at `position` (null: the descriptor's own) into the open file. */
  function writeAt(open, bytes, position, syscall) {
    const node = open.node;
    if (!open.mode.write) fail("EBADF", syscall);
    if (node.kind === "dev") {
      if (node.name === "full") fail("EPERM", syscall);
      return bytes.length;
    }
    if (node.kind !== "file") fail("EISDIR", syscall);
    let at = open.mode.append ? node.data.length : position ?? open.position;
    const end = at + bytes.length;
    if (end > node.data.length) {
      const grown = new Uint8Array(end);
      grown.set(node.data);
      node.data = grown;
    }
    node.data.set(bytes, at);
    if (position === null || position === undefined || open.mode.append) open.position = end;
    return bytes.length;
  }
  function readAt(open, target, offset, length, position, syscall) {
    const node = open.node;
    if (!open.mode.read) fail("EBADF", syscall);
    if (node.kind === "dev") {
      const view = target.subarray(offset, offset + length);
      if (node.name === "random") crypto.getRandomValues(view);
      else if (node.name !== "null") view.fill(0);
      return node.name === "null" ? 0 : view.length;
    }
    if (node.kind !== "file") fail("EISDIR", syscall);
    const start = position ?? open.position;
    const slice = node.data.subarray(start, start + length);
    target.set(slice, offset);
    if (position === null || position === undefined) open.position = start + slice.length;
    return slice.length;
  }
  const decoded = (bytes, encoding) => (encoding && encoding !== "buffer" ? Buffer.from(bytes).toString(encoding) : Buffer.from(bytes));
  const encodingOf = (options) => (typeof options === "string" ? options : options?.encoding ?? null);

  // -- the synchronous API (everything else wraps it) -----------------------------------------

  const sync = {
    existsSync(path) {
      try { return lookup(absolute(path)) !== null; } catch { return false; }
    },
    accessSync(path, mode = 0) {
      const node = existing(path, "access");
      if ((mode & 2) && !node.writable) {
        const error = new Error(`no such file or directory, access '${path}'`);
        Object.assign(error, { errno: -2, code: "ENOENT", syscall: "access", path: String(path) });
        throw error;
      }
    },
    statSync(path, options) {
      const where = absolute(path);
      const node = lookup(where);
      if (node === null) {
        if (options?.throwIfNoEntry === false) return undefined;
        fail("ENOENT", "stat", String(path));
      }
      return new Stats(node, options?.bigint);
    },
    lstatSync(path, options) {
      const node = lookup(absolute(path), false);
      if (node === null) {
        if (options?.throwIfNoEntry === false) return undefined;
        fail("ENOENT", "lstat", String(path));
      }
      return new Stats(node, options?.bigint);
    },
    fstatSync(fd, options) { return new Stats(entry(fd, "fstat").node, options?.bigint); },
    statfsSync(path) {
      existing(path, "statfs");
      return { type: 0, bsize: 0, blocks: 0, bfree: 0, bavail: 0, files: 0, ffree: 0 };
    },
    readFileSync(path, options) {
      const flag = typeof options === "object" && options?.flag ? options.flag : "r";
      const fd = typeof path === "number" ? path : open(path, flag, "readAll");
      try {
        const open = entry(fd, "readAll");
        if (open.node.kind === "dir") fail("EISDIR", "readAll");
        const bytes = open.node.kind === "dev" ? new Uint8Array(0) : open.node.data.slice(open.position);
        return decoded(bytes, encodingOf(options));
      } finally {
        if (typeof path !== "number") fds.delete(fd);
      }
    },
    writeFileSync(path, data, options) {
      const flag = typeof options === "object" && options?.flag ? options.flag : "w";
      const fd = typeof path === "number" ? path : open(path, flag, "writeAll");
      try {
        writeAt(entry(fd, "writeAll"), bytesOf(data, encodingOf(options) ?? "utf8"), null, "writeAll");
      } finally {
        if (typeof path !== "number") fds.delete(fd);
      }
    },
    appendFileSync(path, data, options) {
      const flag = typeof options === "object" && options?.flag ? options.flag : "a";
      sync.writeFileSync(path, data, { encoding: encodingOf(options) ?? "utf8", flag });
    },
    openSync(path, flags = "r") { return open(path, flags); },
    closeSync(fd) { fds.delete(fd); },
    readSync(fd, buffer, offset = 0, length, position = null) {
      if (offset !== null && typeof offset === "object") ({ offset = 0, length, position = null } = offset);
      length ??= buffer.byteLength - offset;
      const target = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
      return readAt(entry(fd, "read"), target, offset, length, position, "read");
    },
    writeSync(fd, data, offset, length, position) {
      const open = entry(fd, "write");
      if (typeof data === "string") {
        const pos = typeof offset === "number" ? offset : null;
        return writeAt(open, Buffer.from(data, typeof length === "string" ? length : "utf8"), pos, "write");
      }
      let bytes = bytesOf(data);
      offset ??= 0;
      length ??= bytes.length - offset;
      bytes = bytes.subarray(offset, offset + length);
      return writeAt(open, bytes, position ?? null, "write");
    },
    readvSync(fd, buffers, position = null) {
      let total = 0;
      for (const buffer of buffers) {
        const n = sync.readSync(fd, buffer, 0, buffer.byteLength, position === null ? null : position + total);
        total += n;
        if (n < buffer.byteLength) break;
      }
      return total;
    },
    writevSync(fd, buffers, position = null) {
      let total = 0;
      for (const buffer of buffers) total += sync.writeSync(fd, buffer, 0, buffer.byteLength, position === null ? null : position + total);
      return total;
    },
    ftruncateSync(fd, length = 0) {
      const open = entry(fd, "ftruncate");
      if (!open.mode.write || open.node.kind !== "file") fail("EBADF", "ftruncate");
      const data = new Uint8Array(length);
      data.set(open.node.data.subarray(0, length));
      open.node.data = data;
    },
    truncateSync(path, length = 0) {
      const fd = open(path, "r+", "truncate");
      try { sync.ftruncateSync(fd, length); } finally { fds.delete(fd); }
    },
    fsyncSync(fd) { entry(fd, "fsync"); },
    fdatasyncSync(fd) { entry(fd, "fdatasync"); },
    mkdirSync(path, options) {
      const recursive = typeof options === "object" && options?.recursive;
      const where = absolute(path);
      if (recursive) {
        let first;
        let at = "";
        for (const part of segments(where)) {
          at += "/" + part;
          const node = lookup(at);
          if (node === null) {
            const [parent, name] = parentOf(at, "mkdir");
            if (!parent.writable) fail("EPERM", "mkdir");
            parent.children.set(name, dir(true));
            first ??= at;
          } else if (node.kind !== "dir") {
            fail("ENOTDIR", "mkdir", at);
          }
        }
        return first;
      }
      if (lookup(where) !== null) return undefined;  // (workerd accepts an existing path)
      const [parent, name] = parentOf(where, "mkdir");
      if (!parent.writable) fail("EPERM", "mkdir");
      parent.children.set(name, dir(true));
      return undefined;
    },
    mkdtempSync(prefix) {
      const base = absolute(prefix);
      const [parent] = parentOf(base, "mkdtemp");
      if (!parent.writable) fail("EPERM", "mkdtemp");
      const counter = tmp();
      let name;
      do { name = `${base}${counter.temps++}`; } while (lookup(name) !== null);
      sync.mkdirSync(name);
      return name;
    },
    readdirSync(path, options) {
      const where = absolute(path);
      const node = existing(path, "readdir");
      if (node.kind !== "dir") fail("ENOTDIR", "readdir", String(path));
      const types = typeof options === "object" && options?.withFileTypes;
      const recursive = typeof options === "object" && options?.recursive;
      const encoding = encodingOf(options);
      const out = [];
      const walk = (at, prefix, full) => {
        for (const [name, child] of at.children) {
          const shown = prefix + name;
          if (types) out.push(new Dirent(name, child, full));
          else out.push(encoding === "buffer" ? Buffer.from(shown) : shown);
          if (recursive && child.kind === "dir") walk(child, shown + "/", full + "/" + name);
        }
      };
      walk(node, "", where);
      return out;
    },
    opendirSync(path) { return new Dir(absolute(path), sync.readdirSync(path, { withFileTypes: true })); },
    rmdirSync(path, options) {
      if (options?.recursive) return sync.rmSync(path, { recursive: true, force: true });
      const where = absolute(path);
      const node = existing(path, "rmdir");
      if (node.kind !== "dir") fail("ENOTDIR", "rmdir", String(path));
      if (node.children.size > 0) fail("ENOTEMPTY", "rm", basename(where));
      remove(where, "rmdir");
    },
    rmSync(path, options) {
      const where = absolute(path);
      const node = lookup(where, false);
      if (node === null) return;  // (workerd accepts a missing path without `force`)
      if (node.kind === "dir" && node.children.size > 0 && !options?.recursive) fail("ENOTEMPTY", "rm", basename(where));
      remove(where, "rm");
    },
    unlinkSync(path) {
      const where = absolute(path);
      const node = lookup(where, false);
      if (node === null) fail("ENOENT", "unlink", String(path));
      if (node.kind === "dir") fail("EISDIR", "unlink", null, "Cannot unlink a directory");
      remove(where, "unlink");
    },
    renameSync(from, to) {
      const source = absolute(from, "oldPath");
      const node = lookup(source, false);
      if (node === null) fail("ENOENT", "rename", String(from));
      const [parent, name] = parentOf(absolute(to, "newPath"), "rename");
      if (!parent.writable) fail("EPERM", "rename");
      remove(source, "rename");
      parent.children.set(name, node);
    },
    copyFileSync(from, to, mode = 0) {
      const node = existing(from, "copyfile");
      if (node.kind !== "file") fail("EISDIR", "copyfile");
      sync.writeFileSync(to, node.data.slice(), { flag: mode & 1 ? "wx" : "w" });
    },
    cpSync(from, to, options) {
      const node = existing(from, "cp");
      if (node.kind === "dir") {
        if (!options?.recursive) fail("EISDIR", "cp");
        sync.mkdirSync(to, { recursive: true });
        for (const name of node.children.keys()) sync.cpSync(`${absolute(from)}/${name}`, `${absolute(to)}/${name}`, options);
      } else {
        sync.copyFileSync(from, to);
      }
    },
    symlinkSync(target, path) {
      const [parent, name] = parentOf(absolute(path), "symlink");
      if (!parent.writable) fail("EPERM", "symlink");
      if (parent.children.has(name)) fail("EEXIST", "symlink");
      parent.children.set(name, { kind: "link", target: String(target), writable: true, ino: nextIno++, atimeMs: 0, mtimeMs: 0 });
    },
    readlinkSync(path) {
      const node = existing(path, "readlink", false);
      if (node.kind !== "link") fail("EINVAL", "readlink", String(path));
      return node.target;
    },
    linkSync(existingPath, path) {
      const node = existing(existingPath, "link");
      const [parent, name] = parentOf(absolute(path), "link");
      if (!parent.writable) fail("EPERM", "link");
      if (parent.children.has(name)) fail("EEXIST", "link");
      parent.children.set(name, node);
    },
    realpathSync(path) {
      let where = absolute(path);
      for (let depth = 0; depth < 40; depth++) {
        const node = lookup(where, false);
        if (node === null) fail("ENOENT", "realpath", String(path));
        if (node.kind !== "link") return where;
        where = absolute(node.target);
      }
      return fail("ELOOP", "realpath", String(path));
    },
    utimesSync(path, atime, mtime) { touch(existing(path, "utime"), mtime); },
    lutimesSync(path, atime, mtime) { touch(existing(path, "lutime", false), mtime); },
    futimesSync(fd, atime, mtime) { touch(entry(fd, "futime").node, mtime); },
    // Permissions and owners do not exist in the virtual file system: accepted, no effect.
    chmodSync(path) { existing(path, "chmod"); },
    lchmodSync(path) { existing(path, "lchmod", false); },
    fchmodSync(fd) { entry(fd, "fchmod"); },
    chownSync(path) { existing(path, "chown"); },
    lchownSync(path) { existing(path, "lchown", false); },
    fchownSync(fd) { entry(fd, "fchown"); },
    // Not implemented by workerd either: glob finds nothing, watching is refused.
    globSync() { return []; },
  };
  function touch(node, mtime) {
    node.mtimeMs = mtime instanceof Date ? mtime.getTime() : Number(mtime);
  }
  function remove(where, syscall) {
    const [parent, name] = parentOf(where, syscall);
    if (!parent.writable) fail("EPERM", syscall);
    parent.children.delete(name);
  }

  class Dir {
    #entries;
    constructor(path, entries) { this.path = path; this.#entries = entries; }
    readSync() { return this.#entries.shift() ?? null; }
    async read() { return this.readSync(); }
    closeSync() { this.#entries = []; }
    async close() { this.closeSync(); }
    async *[Symbol.asyncIterator]() { let next; while ((next = this.readSync()) !== null) yield next; }
    *[Symbol.iterator]() { let next; while ((next = this.readSync()) !== null) yield next; }
  }

  // -- callbacks and promises -----------------------------------------------------------------

  const later = (fn) => queueMicrotask(host.bindContext(fn));
  function callbackForm(fn, name) {
    return {
      [name](...args) {
        const callback = args.pop();
        if (typeof callback !== "function") {
          const error = new TypeError('The "cb" argument must be of type function. Received ' + typeof callback);
          error.code = "ERR_INVALID_ARG_TYPE";
          throw error;
        }
        let result, failure = null;
        try { result = fn(...args); } catch (error) { failure = error; }
        later(() => (failure ? callback(failure) : callback(null, result)));
      },
    }[name];
  }
  const fs = { constants, F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1, Stats, Dirent, Dir };
  for (const [name, fn] of Object.entries(sync)) {
    fs[name] = fn;
    fs[name.slice(0, -4)] = callbackForm(fn, name.slice(0, -4));
  }
  fs.exists = (path, callback) => later(() => callback(sync.existsSync(path)));
  fs.read = (fd, buffer, ...rest) => {
    const callback = rest.pop();
    let n, failure = null;
    try { n = sync.readSync(fd, buffer, ...rest); } catch (error) { failure = error; }
    later(() => (failure ? callback(failure) : callback(null, n, buffer)));
  };
  fs.write = (fd, data, ...rest) => {
    const callback = rest.pop();
    let n, failure = null;
    try { n = sync.writeSync(fd, data, ...rest); } catch (error) { failure = error; }
    later(() => (failure ? callback(failure) : callback(null, n, data)));
  };
  fs.watch = fs.watchFile = fs.unwatchFile = unsupported;
  fs.openAsBlob = async (path) => new Blob([sync.readFileSync(path)]);

  class FileHandle {
    #fd;
    constructor(fd) { this.#fd = fd; }
    get fd() { return this.#fd; }
    async readFile(options) { return sync.readFileSync(this.#fd, options); }
    async writeFile(data, options) { sync.writeFileSync(this.#fd, data, options); }
    async appendFile(data, options) { sync.writeFileSync(this.#fd, data, options); }
    async read(buffer, offset, length, position) {
      buffer ??= Buffer.alloc(16384);
      const bytesRead = sync.readSync(this.#fd, buffer, offset, length, position);
      return { bytesRead, buffer };
    }
    async write(data, ...rest) { return { bytesWritten: sync.writeSync(this.#fd, data, ...rest), buffer: data }; }
    async stat(options) { return sync.fstatSync(this.#fd, options); }
    async truncate(length) { sync.ftruncateSync(this.#fd, length); }
    async sync() {}
    async datasync() {}
    async chmod() {}
    async chown() {}
    async utimes(atime, mtime) { sync.futimesSync(this.#fd, atime, mtime); }
    async close() { sync.closeSync(this.#fd); }
    async [Symbol.asyncDispose]() { sync.closeSync(this.#fd); }
  }
  const promises = { constants, FileHandle };
  for (const [name, fn] of Object.entries(sync)) {
    if (["existsSync", "openSync", "closeSync", "readSync", "writeSync", "readvSync", "writevSync",
      "fstatSync", "ftruncateSync", "fsyncSync", "fdatasyncSync", "futimesSync", "fchmodSync",
      "fchownSync", "globSync", "opendirSync"].includes(name)) continue;
    const plain = name.slice(0, -4);
    promises[plain] = { async [plain](...args) { return fn(...args); } }[plain];
  }
  promises.open = async (path, flags = "r") => new FileHandle(open(path, flags));
  promises.opendir = async (path) => sync.opendirSync(path);
  promises.glob = async function* () {};
  promises.watch = unsupported;
  promises.lchmod = async (path) => sync.lchmodSync(path);
  fs.promises = promises;

  // -- streams --------------------------------------------------------------------------------

  class ReadStream extends stream.Readable {
    constructor(path, options = {}) {
      if (typeof options === "string") options = { encoding: options };
      super(options);
      this.path = path;
      this.fd = options.fd ?? null;
      this.start = options.start;
      this.end = options.end ?? Infinity;
      this.bytesRead = 0;
      this.pending = true;
      this._position = this.start ?? 0;
    }
    _read() {
      try {
        if (this.fd === null) {
          this.fd = open(this.path, this.flags ?? "r");
          this.pending = false;
          this.emit("open", this.fd);
          this.emit("ready");
        }
        const want = Math.min(65536, this.end + 1 - this._position);
        const buffer = Buffer.alloc(Math.max(0, want));
        const n = want > 0 ? sync.readSync(this.fd, buffer, 0, want, this._position) : 0;
        this._position += n;
        this.bytesRead += n;
        if (n === 0) {
          sync.closeSync(this.fd);
          this.push(null);
          later(() => this.emit("close"));
        } else {
          this.push(buffer.subarray(0, n));
        }
      } catch (error) {
        this.destroy(error);
      }
    }
  }
  class WriteStream extends stream.Writable {
    constructor(path, options = {}) {
      if (typeof options === "string") options = { encoding: options };
      super(options);
      this.path = path;
      this.bytesWritten = 0;
      this.pending = false;
      try {
        this.fd = options.fd ?? open(path, options.flags ?? "w");
      } catch (error) {
        this.fd = null;
        later(() => this.destroy(error));
      }
    }
    _write(chunk, encoding, callback) {
      try {
        this.bytesWritten += sync.writeSync(this.fd, chunk);
        callback();
      } catch (error) {
        callback(error);
      }
    }
    _final(callback) {
      sync.closeSync(this.fd);
      callback();
      later(() => this.emit("close"));
    }
  }
  fs.ReadStream = fs.FileReadStream = ReadStream;
  fs.WriteStream = fs.FileWriteStream = WriteStream;
  fs.createReadStream = (path, options) => new ReadStream(path, options);
  fs.createWriteStream = (path, options) => new WriteStream(path, options);

  const namespace = (object) => Object.freeze(Object.assign(Object.create(null), object, { default: object }));
  modules["node:fs"] = namespace(fs);
  modules["node:fs/promises"] = namespace(promises);
})();
