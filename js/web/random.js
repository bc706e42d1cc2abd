// Randomness for getRandomValues, randomUUID and node's randomBytes, which must answer
// synchronously while the host can only be reached asynchronously.
//
// The bytes come from a pool of the host's OS entropy (os.urandom):
//   * the first bytes arrive with the isolate (webops/entropy.entropy_script(), evaluated
//     before any user code);
//   * once fewer than LOW_WATER bytes are left, an `entropy` request asks the host for
//     REFILL_BYTES more (64 KiB after the pool ran dry), which arrive a turn later;
//   * served bytes are wiped from the pool, so it never holds past output.
// When a single turn draws more than the pool holds (the pool runs dry), the rest comes
// from a NIST SP 800-90A CTR_DRBG (AES-256, from the audited @noble/ciphers, vendored),
// made the first time it is needed from OS bytes set aside from the latest delivery and
// reseeded with the fresh ones of every later delivery. So a draw never fails and never waits; between two refills
// its output is as strong as AES-256 keyed by OS entropy. See celld/isolate/DECISIONS.md.
"use strict";
(() => {
  const { PromisePrototypeThen } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;

  const SEED_BYTES = 48; // the CTR_DRBG's seed: AES-256 key and block
  const REFILL_BYTES = 16384;
  const LARGE_REFILL_BYTES = 65536 - SEED_BYTES; // after the generator had to serve a draw
  const LOW_WATER = 1024;
  const DRBG_MAX = 65536; // the most one CTR_DRBG call gives

  let pool = new Uint8Array(0);
  let at = 0;
  const SPARE_BYTES = 4096;
  let spare = new Uint8Array(0); // generator output for small draws, wiped as served
  let spareAt = 0;
  let seed = null; // OS bytes set aside for the generator, not used yet
  let drbg = null; // made when the pool first runs dry
  let refill = null; // the outstanding `entropy` request, if any
  let dry = false; // the generator served bytes since the last refill was asked for
  const stats = { fromPool: 0, fromGenerator: 0, refills: 0, requests: 0 };

  /** Take a delivery of OS bytes: the first SEED_BYTES (re)seed the generator, the rest
   * join what is left of the pool. */
  function deliver(base64) {
    const bytes = web.base64ToBytes(base64);
    if (bytes.length <= SEED_BYTES) throw new TypeError("celld: an entropy delivery is too short");
    if (seed !== null) seed.fill(0);
    seed = bytes.slice(0, SEED_BYTES);
    const rest = pool.subarray(at);
    const next = new Uint8Array(rest.length + bytes.length - SEED_BYTES);
    next.set(rest);
    next.set(bytes.subarray(SEED_BYTES), rest.length);
    pool.fill(0);
    bytes.fill(0);
    pool = next;
    at = 0;
    spare.fill(0);
    spare = new Uint8Array(0);
    spareAt = 0;
    stats.refills++;
  }

  function requestRefill() {
    if (refill !== null && refill.waiting()) return;
    stats.requests++;
    // Owned by no request: the end of the request that drew the bytes must not cancel it.
    const bytes = SEED_BYTES + (dry ? LARGE_REFILL_BYTES : REFILL_BYTES);
    dry = false;
    refill = host.runAs(null, () => host.requestCancellable("entropy", { bytes }));
    PromisePrototypeThen(refill.promise, deliver, (error) => web.reportError(error));
  }

  /** The CTR_DRBG, reseeded with the OS bytes set aside since it last drew on them. */
  function generator() {
    if (seed !== null) {
      if (drbg === null) drbg = web.nobleCiphers().rngAesCtrDrbg256(seed);
      else drbg.addEntropy(seed);
      seed.fill(0);
      seed = null;
    }
    return drbg;
  }

  /** `n` random bytes, at once. */
  function randomBytes(n) {
    if (drbg === null && seed === null) {
      if (refill === null || !refill.waiting()) requestRefill();
      throw new Error("celld: crypto has no entropy yet (the host must evaluate entropy_script() in each isolate before user code)");
    }
    const out = new Uint8Array(n);
    const fromPool = Math.min(n, pool.length - at);
    out.set(pool.subarray(at, at + fromPool));
    pool.fill(0, at, at + fromPool);
    at += fromPool;
    if (n - fromPool <= SPARE_BYTES) {
      // Small draws (UUIDs) take generator output made a block of SPARE_BYTES at a time:
      // each call of the generator sets up AES again, which costs more than the bytes.
      for (let i = fromPool; i < n;) {
        if (spareAt === spare.length) {
          spare = generator().randomBytes(SPARE_BYTES);
          spareAt = 0;
        }
        const take = Math.min(n - i, spare.length - spareAt);
        out.set(spare.subarray(spareAt, spareAt + take), i);
        spare.fill(0, spareAt, spareAt + take);
        spareAt += take;
        i += take;
      }
    } else {
      for (let i = fromPool; i < n; i += DRBG_MAX) {
        out.set(generator().randomBytes(Math.min(DRBG_MAX, n - i)), i);
      }
    }
    stats.fromPool += fromPool;
    stats.fromGenerator += n - fromPool;
    if (n > fromPool) dry = true;
    if (pool.length - at < LOW_WATER) requestRefill();
    return out;
  }

  // The first bytes, from entropy_script(). It may run before the runtime (it then leaves
  // them in `__celld_entropy_initial`, taken here) or after it (it then calls
  // `__celld_entropy_seed`). Both are removed once used so that user code cannot inject
  // bytes. Without either, ask the host at once.
  if (typeof globalThis.__celld_entropy_initial === "string") {
    deliver(globalThis.__celld_entropy_initial);
    delete globalThis.__celld_entropy_initial;
  } else {
    Object.defineProperty(globalThis, "__celld_entropy_seed", {
      configurable: true,
      enumerable: false,
      writable: false,
      value: (base64) => {
        deliver(base64);
        delete globalThis.__celld_entropy_seed;
      },
    });
    requestRefill();
  }

  web.randomBytes = randomBytes;
  /** Where drawn bytes came from (tests; the pool's behaviour when it runs dry). */
  web.randomStats = () => ({ ...stats, poolLeft: pool.length - at });
})();
