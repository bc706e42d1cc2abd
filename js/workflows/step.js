// The `step` object a workflow's run() receives, and the runner that starts runs.
//
// A run replays from the top each time an instance makes progress after it was
// suspended. Finished steps come with the run's start message as a journal, so
// they resolve here without asking the host. Everything else is a request to the
// engine, which answers with a decision once the engine's state is durable.
"use strict";
(() => {
  // Built-ins as they were before user code ran: a step callback may patch JSON,
  // Object.assign, Map.prototype.set, Array.prototype.push and the like, and what is
  // recorded must not change (js/primordials.js).
  const {
    ArrayIsArray,
    ArrayBufferIsView,
    Date,
    JSONParse,
    JSONStringify,
    ObjectAssign,
    ObjectFreeze,
    Promise,
    PromisePrototypeThen,
    PromiseReject,
    PromiseResolve,
    SafeMap,
    SafeSet,
    StringPrototypeIndexOf,
    stringify,
    uncurryThis,
    isDate,
    DatePrototypeGetTime,
  } = globalThis.__celld_primordials;
  const RegExpPrototypeExec = uncurryThis(RegExp.prototype.exec);
  const ObjectSetPrototypeOf = Object.setPrototypeOf; // (as it was before user code ran)
  const FunctionPrototypeBind = uncurryThis(Function.prototype.bind);
  const host = globalThis.__celld_host;
  const hostText = globalThis.__celld_host_text; // (js/host.js: taken here, gone for user code)
  delete globalThis.__celld_host_text;
  // The matcher of the engine's local step rules (js/workflows/rules.js, same treatment).
  const decideRules = globalThis.__celld_step_rules_decide;
  delete globalThis.__celld_step_rules_decide;
  // The rules themselves (celld/engine/local.py), from the first wf.start of this isolate.
  let stepRules = null;
  const cloudflare = globalThis.__celld_cloudflare;
  const serialize = (value) => globalThis.__celld_serialize(value);
  const deserialize = (text) => globalThis.__celld_deserialize(text);
  const decode = (tree) => globalThis.__celld_web.decode(tree);

  const DELAY_FUNCTION_TIMEOUT_MS = 5000;

  // A step may return a fresh ReadableStream of bytes: its bytes are recorded (within the
  // step output limit, as any value) under this tag, and every later read of the step,
  // replays included, gets a new stream of them.
  const STREAM_TAG = "__celld_readable_stream__";
  const ReadableStreamClass = globalThis.ReadableStream;
  const Uint8ArrayClass = globalThis.Uint8Array;
  const encodeText = (text) => new globalThis.TextEncoder().encode(text);

  function chunkBytes(chunk) {
    if (chunk instanceof Uint8ArrayClass) return chunk;
    if (ArrayBufferIsView(chunk)) return new Uint8ArrayClass(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (chunk instanceof globalThis.ArrayBuffer) return new Uint8ArrayClass(chunk);
    if (typeof chunk === "string") return encodeText(chunk);
    throw new TypeError("a ReadableStream returned by a step must yield bytes (Uint8Array)");
  }

  /** Read a stream a step returned to its end, as the tagged bytes that are recorded. */
  async function recordStream(stream) {
    if (stream.locked) throw new TypeError("a ReadableStream returned by a step must not be locked");
    const reader = stream.getReader();
    const parts = [];
    let total = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const bytes = chunkBytes(value);
      parts[parts.length] = bytes;
      total += bytes.byteLength;
    }
    const all = new Uint8ArrayClass(total);
    let offset = 0;
    for (let i = 0; i < parts.length; i++) {
      all.set(parts[i], offset);
      offset += parts[i].byteLength;
    }
    return { [STREAM_TAG]: all };
  }

  // Promise.resolve as it was before user code ran, bound once (cheaper per call than the
  // primordial's apply, and a step replayed from the journal needs one per step).
  const resolved = FunctionPrototypeBind(Promise.resolve, Promise);

  // The journal (celld/engine/decisions.py, journal_member): each finished step's key
  // maps to its recorded value as serialized, or to an error under this tag, which the
  // serializer never emits (it escapes objects with a "$" key of their own).
  const ERROR_TAG = "celld:error";

  function isRecordedError(entry) {
    return entry !== null && typeof entry === "object" && entry.$ === ERROR_TAG;
  }

  /** A recorded value (its serialized tree) as run() sees it; a primitive is itself. */
  function recordedValue(tree) {
    return tree === null || typeof tree !== "object" ? tree : revive(decode(tree));
  }

  /** A recorded step value as run() sees it: tagged bytes become a new stream. */
  function revive(value) {
    if (value === null || typeof value !== "object" || !(value[STREAM_TAG] instanceof Uint8ArrayClass)) {
      return value;
    }
    const bytes = value[STREAM_TAG];
    return new ReadableStreamClass({
      start(controller) {
        if (bytes.byteLength > 0) controller.enqueue(bytes);
        controller.close();
      },
    });
  }

  // Error classes workerd's RPC serialization keeps by name (celld/engine/errors.py).
  const RPC_KEPT = new SafeSet([
    "Error", "TypeError", "RangeError", "SyntaxError", "ReferenceError", "EvalError",
    "URIError", "AggregateError",
  ]);

  /** A step's error as run() sees it. On Cloudflare each step call is an RPC to the engine,
   * so other names (NonRetryableError, custom classes, WorkflowTimeoutError) arrive folded:
   * an Error whose message is "<Name>: <message>", as wrangler dev shows. */
  function engineError(shape) {
    if (!RPC_KEPT.has(shape.name)) {
      const message = shape.message ? `${shape.name}: ${shape.message}` : shape.name;
      return host.reviveError({ name: "Error", message });
    }
    return host.reviveError(shape);
  }

  function isNonRetryable(error) {
    if (!error || typeof error !== "object") return false;
    return error instanceof cloudflare.NonRetryableError || error.name === "NonRetryableError";
  }

  /** Step config as plain data; a delay function is replaced by a marker. */
  function wireConfig(config) {
    if (config === undefined || config === null) return { config: null, dynamic: false };
    if (typeof config !== "object" || ArrayIsArray(config)) return { config, dynamic: false };
    const copy = ObjectAssign({}, config);
    let dynamic = false;
    if (copy.retries && typeof copy.retries === "object") {
      copy.retries = ObjectAssign({}, copy.retries);
      if (typeof copy.retries.delay === "function") {
        dynamic = true;
        delete copy.retries.delay;
      }
    }
    return { config: copy, dynamic };
  }

  /** A fresh copy of a step context for user code. The context arrives from the host as JSON,
   * so a JSON round trip copies it exactly, at a tenth of structuredClone's cost here. */
  function copyContext(context) {
    return JSONParse(stringify(context));
  }

  /** The first of `promises` to settle, without Promise.race or a patched `then`. */
  function race(promises) {
    return new Promise((resolve, reject) => {
      for (let i = 0; i < promises.length; i++) PromisePrototypeThen(promises[i], resolve, reject);
    });
  }

  /** `promise`, with `cleanup` run once it settles (Promise.prototype.finally, unpatched). */
  function settled(promise, cleanup) {
    return PromisePrototypeThen(
      promise,
      (value) => {
        cleanup();
        return value;
      },
      (error) => {
        cleanup();
        throw error;
      },
    );
  }

  /** Race `promise` against a host timer of `ms`; the timer is withdrawn (on both sides)
   * as soon as the race is decided. Used for delay functions only: step attempts are timed
   * by the host (`wf.timeout`), with nothing armed here. */
  function withTimeout(run, promise, ms, onTimeout) {
    const timer = host.runAs(run, () => host.requestCancellable("wf.timer", { g: run.generation, r: run.r, ms }));
    const expired = PromisePrototypeThen(timer.promise, () => { throw onTimeout(); });
    return settled(race([promise, expired]), () => timer.cancel());
  }

  // The runs in progress in this isolate, by the number the host gave each (`r`). An
  // isolate runs many instances' runs at once, as workerd runs many instances of a
  // Workflow class in one isolate: each run is a promise chain with its own state here,
  // and module state is shared between them (celld/isolate/DECISIONS.md, "runs per
  // isolate"). Every message of a run carries its `r`; the host routes it to that run.
  const runs = new SafeMap();

  function newRun(r, generation) {
    return {
      r,
      generation,
      // The run's step object and, in a rollback run, its plan (celld/engine/rollback.py).
      step: null,
      plan: null,
      // False while a pause is pending: every attempt then waits for the engine's word.
      mayBegin: true,
      checkVersion: false,
      // The host lets this run resolve a step itself where the engine's rules allow.
      local: false,
      // In-flight attempts the host may time out: "<key>#<attempt>" -> abandon(error).
      attempts: new SafeMap(),
    };
  }

  /** The run a message from the host is for, if it is still the generation addressed. */
  function runOf(message) {
    const run = runs.get(message.r);
    return run !== undefined && run.generation === message.g ? run : undefined;
  }

  // An isolate given to another run after being idle forgets every run it held.
  host.afterReset(() => runs.clear());

  function attemptTimedOut(timeout) {
    const error = new Error(`Execution timed out after ${timeout}ms`);
    error.name = "WorkflowTimeoutError";
    error.timedOut = true;
    return error;
  }

  /** The callback's promise, abandoned when the host says the attempt timed out. One
   * promise settled by whichever comes first (a race of two promises, with its cleanup,
   * took three more jobs on every step). */
  function timedAttempt(run, key, attempt, promise, timeout) {
    const slot = `${key}#${attempt}`;
    return new Promise((resolve, reject) => {
      run.attempts.set(slot, () => {
        run.attempts.delete(slot);
        reject(attemptTimedOut(timeout));
      });
      PromisePrototypeThen(
        promise,
        (value) => {
          run.attempts.delete(slot);
          resolve(value);
        },
        (error) => {
          run.attempts.delete(slot);
          reject(error);
        },
      );
    });
  }

  host.on("wf.timeout", (message) => {
    const run = runOf(message);
    if (run === undefined) return;
    const abandon = run.attempts.get(`${message.key}#${message.attempt}`);
    if (abandon) abandon();
  });
  host.on("wf.hold", (message) => {
    const run = runOf(message);
    if (run !== undefined) run.mayBegin = false;
  });
  host.on("wf.release", (message) => {
    const run = runOf(message);
    if (run !== undefined) run.mayBegin = true;
  });
  // The run left this isolate (it ended, hibernated or moved): forget it, and the answers
  // the host still owed it. Its promise chain is never settled again.
  host.on("wf.drop", (message) => {
    const run = runs.get(message.r);
    if (run === undefined) return;
    runs.delete(message.r);
    run.dropped = true;
    host.cancelOwned(run);
  });

  // What the engine answers for a step's first attempt depends only on the step's
  // config: its resolved form, timeout and whether a failure will be retried. Once seen,
  // a step with the same config starts its first attempt at once and tells the engine
  // in the same message batch (`wf.begin`), saving a round trip per step.
  const firstAttempts = new SafeMap();
  // A step.do call without config or rollback (the usual one): its wire form and shape.
  const NO_CONFIG = ObjectFreeze({ config: null, dynamic: false });
  const NO_CONFIG_SHAPE = stringify([null, false, null]);
  const RESOLVED = PromiseResolve(undefined);
  const MAX_STEP_NAME = 256;

  // (a control character; the regular expression is this module's own, so its exec reads
  // nothing user code can reach, and it is cheaper here than a loop over the name)
  const CONTROL_CHARACTER = /[\x00-\x1f]/;

  function plainStepName(name) {
    return name.length <= MAX_STEP_NAME && RegExpPrototypeExec(CONTROL_CHARACTER, name) === null;
  }

  /** Run one attempt of a step callback (or a rollback handler) and report how it went:
   * `{ok, value}`, `{ok: false, error, nonretryable, timedOut, delay...}` or
   * `{unserializable}`. */
  async function attemptOnce(run, key, callback, rawConfig, context, timeout, willRetry) {
    let value;
    try {
      value = await timedAttempt(
        run,
        key,
        context.attempt,
        // A returned stream is read to its end within the attempt (and its timeout).
        PromisePrototypeThen(
          PromisePrototypeThen(PromiseResolve(undefined), () => callback(copyContext(context))),
          (result) => (result instanceof ReadableStreamClass ? recordStream(result) : result),
        ),
        timeout,
      );
    } catch (error) {
      return failureReport(run, error, rawConfig, context, willRetry);
    }
    return successReport(value);
  }

  /** `{ok: true, value}` with the value serialized, or `{unserializable}`. */
  function successReport(value) {
    let text;
    try {
      text = serialize(value);
    } catch (error) {
      if (error && error.name === "DataCloneError") return { unserializable: true };
      throw error;
    }
    return { ok: true, value: text };
  }

  /** The report of an attempt that threw `error`, with the retry delay a delay function
   * computes when the step has one and will retry. */
  async function failureReport(run, error, rawConfig, context, willRetry) {
    const report = {
      ok: false,
      error: host.describeError(error),
      nonretryable: isNonRetryable(error),
      timedOut: Boolean(error && error.timedOut),
    };
    const delay = rawConfig && rawConfig.retries && rawConfig.retries.delay;
    if (typeof delay === "function" && willRetry && !report.nonretryable) {
      try {
        report.delay = await withTimeout(
          run,
          PromisePrototypeThen(PromiseResolve(undefined), () => delay({ ctx: copyContext(context), error })),
          DELAY_FUNCTION_TIMEOUT_MS,
          () => {
            const error = new Error("the delay function timed out");
            error.delayTimedOut = true;
            return error;
          },
        );
      } catch (delayError) {
        if (delayError && delayError.delayTimedOut) report.delayTimedOut = true;
        else report.delayError = host.describeError(delayError);
      }
    }
    return report;
  }

  /** A folded engine refusal, thrown into run() as the engine's own would be. */
  function refused(message) {
    return engineError({ name: "WorkflowFatalError", message });
  }

  /** `{rollback, rollbackConfig}` of a step.do call, checked as wrangler dev does. */
  function rollbackOptions(name, options) {
    if (options === undefined) return undefined;
    if (options === null || typeof options !== "object" || ArrayIsArray(options)) {
      throw refused(`Rollback options for "${name}" must be an object`);
    }
    if (typeof options.rollback !== "function") {
      throw refused(`Rollback for "${name}" must be a function`);
    }
    const { config, dynamic } = wireConfig(options.rollbackConfig);
    return { fn: options.rollback, rawConfig: options.rollbackConfig, wire: { config, dynamic } };
  }

  const never = () => new Promise(() => {});
  // What a first step.do call taken from the journal leaves in its place (see `do`).
  const TAKEN = ObjectFreeze({});

  class WorkflowStep {
    #doCounts = new SafeMap();
    #sleepCounts = new SafeMap();
    #waitCounts = new SafeMap();
    #ordinal = 0;
    #generation;
    // this run's state (see `runs`) and the text of its routing fields
    #state;
    #routing;
    // The journal (celld/engine/decisions.py, JournalText): the first step.do call of each
    // name by name alone (`#first`, most of a replay: one lookup, no key to build), every
    // other finished step by its key "<type>:<count>:<name>" (`#keyed`). Both without a
    // prototype, so a name such as "constructor" or "__proto__" finds only a recording.
    #first;
    #keyed;
    #unfinished;
    #stepLimit;
    // A rollback run replays run() only to find the handlers again: finished steps resolve
    // from the journal, anything else never settles, and nothing is asked of the engine.
    #replayOnly;
    // Rollback handlers of this run's step.do calls: "do:<count>:<name>" -> {fn, rawConfig}.
    rollbacks = new SafeMap();

    constructor(run, journal, unfinished, stepLimit, replayOnly) {
      this.#state = run;
      this.#generation = run.generation;
      this.#routing = `"g":${run.generation},"r":${run.r}`;
      this.#first = ObjectSetPrototypeOf(journal.first, null);
      this.#keyed = ObjectSetPrototypeOf(journal.keyed, null);
      this.#unfinished = new SafeSet(unfinished);
      this.#stepLimit = stepLimit;
      this.#replayOnly = Boolean(replayOnly);
    }

    /** The count of this call among the calls of `type` with this name (from 1). Sleeps
     * and sleepUntil share one counter per name. step.do keeps its own (#doCounts),
     * counted inline on its hot path. */
    #next(type, name) {
      const counts = type === "sleep" ? this.#sleepCounts : this.#waitCounts;
      const count = (counts.get(name) || 0) + 1;
      counts.set(name, count);
      return count;
    }

    /** The journal's entry of `key`, taken out of it (undefined: not recorded). */
    #recorded(key) {
      const entry = this.#keyed[key];
      if (entry === undefined) return undefined;
      delete this.#keyed[key];
      if (this.#state.checkVersion) this.#replayed(key);
      return entry;
    }

    /** A replay under another version of the Worker: the host follows which recorded
     * steps the new code asks for (celld/engine/versions.py). */
    #replayed(key) {
      host.notify("wf.replayed", { g: this.#generation, r: this.#state.r, key });
    }

    /** A request of this run: owned by it, so that its answer is forgotten (and the host
     * told to stop) when the run leaves the isolate. */
    #ask(op, fields) {
      const run = this.#state;
      const message = ObjectAssign({ g: this.#generation, r: run.r }, fields);
      return host.runAs(run, () => host.request(op, message));
    }

    // Not an async function: a step found in the journal (every step of a long replay)
    // settles without the async function's frame and promise; everything it throws is
    // handed back as a rejection all the same.
    do(name, configOrCallback, maybeCallback, maybeRollback) {
      // The usual replayed step: the first `do(name, ...)` call of its name, without
      // rollback, recorded with a primitive value, replayed without a version check. It
      // takes its entry (see #do) and resolves with it, and nothing else: each operation
      // here costs ~0.05-0.1 us in this QuickJS build, a replay has one per step.
      if (typeof name === "string" && maybeCallback === undefined && maybeRollback === undefined
        && !this.#state.checkVersion) {
        const first = this.#first;
        const recorded = first[name];
        if (recorded !== undefined && recorded !== TAKEN && (recorded === null || typeof recorded !== "object")) {
          first[name] = TAKEN;
          this.#ordinal++;
          return resolved(recorded);
        }
      }
      return this.#do(name, configOrCallback, maybeCallback, maybeRollback);
    }

    #do(name, configOrCallback, maybeCallback, maybeRollback) {
      try {
        const hasConfig = typeof configOrCallback !== "function";
        // The callback starts in no async context (js/node/async_hooks.js): under wrangler
        // dev an AsyncLocalStorage store of run() is not seen inside a step callback.
        const callback = host.freshContext(hasConfig ? maybeCallback : configOrCallback);
        const rawConfig = hasConfig ? configOrCallback : undefined;
        if (typeof name !== "string") name = String(name);
        const options = hasConfig ? maybeRollback : maybeCallback;
        const rollback = options === undefined ? undefined : rollbackOptions(name, options);
        // The call's count among the step.do calls of its name. A first call found in the
        // journal (every step of a long replay) leaves TAKEN in its place, which counts it:
        // one lookup and one store, no key built; #doCounts counts the names called
        // otherwise. `at`: the key of a later call ("do:<count>:<name>").
        const first = this.#first;
        let recorded = first[name];
        let count = 1;
        let at;
        if (recorded !== undefined && recorded !== TAKEN) {
          first[name] = TAKEN;
        } else {
          const counts = this.#doCounts;
          const seen = counts.get(name);
          count = seen !== undefined ? seen + 1 : recorded === TAKEN ? 2 : 1;
          counts.set(name, count);
          recorded = undefined;
          if (count > 1) {
            at = `do:${count}:${name}`;
            recorded = this.#keyed[at];
            if (recorded !== undefined) delete this.#keyed[at];
          }
        }
        const ordinal = ++this.#ordinal;
        const run = this.#state;
        if (rollback) this.rollbacks.set(count === 1 ? "do:1:" + name : at, rollback);
        if (recorded !== undefined) {
          if (run.checkVersion) this.#replayed(count === 1 ? "do:1:" + name : at);
          // (a recorded primitive is its own value: no calls for the usual replayed step)
          if (recorded === null || typeof recorded !== "object") return resolved(recorded);
          if (isRecordedError(recorded)) return PromiseReject(engineError(recorded.error));
          return resolved(recordedValue(recorded));
        }
        if (this.#replayOnly) return never();
        if (typeof callback !== "function") return this.#refuse(name);
        const key = count === 1 ? "do:1:" + name : at;
        let wire, shape;
        if (rawConfig === undefined && rollback === undefined) {
          wire = NO_CONFIG;
          shape = NO_CONFIG_SHAPE;
        } else {
          wire = wireConfig(rawConfig);
          shape = stringify([wire.config, wire.dynamic, rollback ? rollback.wire : null]);
        }
        const known = firstAttempts.get(shape);
        if (
          known !== undefined && run.mayBegin && !run.checkVersion && !run.dropped
          && !this.#unfinished.has(key) && ordinal <= this.#stepLimit && plainStepName(name)
        ) {
          // (a config with no JSON text, a symbol, goes the general way)
          const configText = wire === NO_CONFIG ? "null" : stringify(wire.config);
          if (configText !== undefined) {
            return this.#begin(name, key, count, ordinal, callback, rawConfig, rollback, wire, configText, shape, known);
          }
        }
        const call = { name, count, ordinal, config: wire.config, dynamic: wire.dynamic };
        if (rollback) call.rollback = rollback.wire;
        return this.#run(call, key, callback, rawConfig, shape);
      } catch (error) {
        return PromiseReject(error);
      }
    }

    /** A step.do call without a callback: the engine's refusal, thrown into run(). */
    async #refuse(name) {
      const refusal = await this.#ask("wf.fatal", { name });
      throw engineError(refusal.reject);
    }

    /** A step the journal does not have, asked of the engine (`wf.do`). */
    async #run(call, key, callback, rawConfig, shape) {
      const decision = await this.#ask("wf.do", call);
      return this.#decided(decision, call.name, key, call.count, callback, rawConfig, shape);
    }

    /** Follow the engine's decisions for a step until it resolves or rejects: run the
     * attempts it asks for and report each. */
    async #decided(decision, name, key, count, callback, rawConfig, shape) {
      for (;;) {
        if ("resolve" in decision) return revive(deserialize(decision.resolve));
        if ("reject" in decision) throw engineError(decision.reject);
        const { attempt, context, timeout, willRetry } = decision.run;
        if (attempt === 1 && !firstAttempts.has(shape)) {
          firstAttempts.set(shape, { config: context.config, configText: stringify(context.config), timeout, willRetry });
        }
        const report = await attemptOnce(this.#state, key, callback, rawConfig, context, timeout, willRetry);
        decision = await this.#ask("wf.attempt", ObjectAssign({ name, count, attempt }, report));
      }
    }

    /**
     * The first attempt of a step whose config the engine has answered before, started at
     * once: the engine hears of it (`wf.begin`) in the same message batch as, usually, the
     * attempt's report. The hot path of a workflow, written without async functions and
     * with its two messages as text: three promise jobs from the step.do call to run()
     * going on (invoke the callback, take its value, run()'s own await) where the general
     * path takes nine. What user code sees is the same: the callback runs in a job of its
     * own with a fresh context, its value or error is recorded as reported, and the step
     * settles with what the engine answers.
     */
    #begin(name, key, count, ordinal, callback, rawConfig, rollback, wire, configText, shape, known) {
      const run = this.#state;
      const routing = this.#routing;
      const nameText = JSONStringify(name);
      const rollbackText = rollback ? `,"rollback":${stringify(rollback.wire)}` : "";
      hostText.notify(
        `{"op":"wf.begin",${routing},"name":${nameText},"count":${count},"ordinal":${ordinal},`
          + `"config":${configText},"dynamic":${wire.dynamic}${rollbackText}}`,
      );
      const slot = `${key}#1`;
      return new Promise((resolve, reject) => {
        let live = true; // neither finished nor timed out yet
        const decided = (decision) => {
          try {
            if ("resolve" in decision) resolve(revive(deserialize(decision.resolve)));
            else if ("reject" in decision) reject(engineError(decision.reject));
            else resolve(this.#decided(decision, name, key, count, callback, rawConfig, shape));
          } catch (error) {
            reject(error);
          }
        };
        const report = (fields) => {
          PromisePrototypeThen(
            this.#ask("wf.attempt", ObjectAssign({ name, count, attempt: 1 }, fields)), decided, reject,
          );
        };
        const fail = (error) => {
          if (!live) return;
          live = false;
          run.attempts.delete(slot);
          const context = { step: { name, count }, attempt: 1, config: known.config };
          PromisePrototypeThen(failureReport(run, error, rawConfig, context, known.willRetry), report, reject);
        };
        const finish = (value) => {
          if (!live) return;
          live = false;
          run.attempts.delete(slot);
          let text;
          try {
            text = serialize(value);
          } catch (error) {
            if (error && error.name === "DataCloneError") report({ unserializable: true });
            else reject(error);
            return;
          }
          // A value with binary data (`{"$":"Blobs"}`: its bytes travel beside the text)
          // is sized by the engine alone, so it takes the engine's answer.
          if (run.local && stepRules !== null && StringPrototypeIndexOf(text, '{"$":"Blobs"') !== 0 && decideRules(stepRules, {
            allowed: true, mayBegin: run.mayBegin, ok: true, first: true,
            alone: run.attempts.size === 0, size: text.length * 3,
          }) === "resolve") {
            // The engine's answer would be this value (celld/engine/local.py): the step
            // resolves now, in this turn, and the engine records the report as settled.
            // The host's output gate holds what JS sends after it until it is written.
            hostText.notify(
              `{"op":"wf.attempt",${routing},"name":${nameText},"count":${count},"attempt":1,`
                + `"ok":true,"local":true,"value":${JSONStringify(text)}}`,
            );
            try {
              resolve(revive(deserialize(text)));
            } catch (error) {
              reject(error);
            }
            return;
          }
          hostText.call(
            "wf.attempt",
            `${routing},"name":${nameText},"count":${count},"attempt":1,"ok":true,"value":${JSONStringify(text)}`,
            decided,
            reject,
            run,
          );
        };
        // A returned stream is read to its end within the attempt (and its timeout).
        const take = (value) => {
          try {
            if (value instanceof ReadableStreamClass) PromisePrototypeThen(recordStream(value), finish, fail);
            else finish(value);
          } catch (error) {
            fail(error); // (a patched instanceof): the attempt failed, as on the general path
          }
        };
        const invoke = () => {
          const config = known.configText === "null" ? null : JSONParse(known.configText);
          let result;
          try {
            result = callback({ step: { name, count }, attempt: 1, config });
          } catch (error) {
            fail(error);
            return;
          }
          if (result !== null && (typeof result === "object" || typeof result === "function")) {
            PromisePrototypeThen(PromiseResolve(result), take, fail);
          } else {
            finish(result);
          }
        };
        run.attempts.set(slot, () => fail(attemptTimedOut(known.timeout)));
        PromisePrototypeThen(RESOLVED, invoke);
      });
    }

    sleep(name, duration) {
      return this.#sleep(name, { duration });
    }

    sleepUntil(name, timestamp) {
      return this.#sleep(name, { until: isDate(timestamp) ? DatePrototypeGetTime(timestamp) : timestamp });
    }

    /** Both sleeps share one counter per name: sleepUntil is a sleep with its end given. */
    async #sleep(name, when) {
      name = String(name);
      const count = this.#next("sleep", name);
      const recorded = this.#recorded(`sleep:${count}:${name}`);
      if (recorded !== undefined) {
        if (isRecordedError(recorded)) throw engineError(recorded.error);
        return undefined;
      }
      if (this.#replayOnly) return never();
      const decision = await this.#ask("wf.sleep", ObjectAssign({ name, count }, when));
      if ("reject" in decision) throw engineError(decision.reject);
      return undefined;
    }

    async waitForEvent(name, options) {
      name = String(name);
      const count = this.#next("waitForEvent", name);
      const recorded = this.#recorded(`waitForEvent:${count}:${name}`);
      let event;
      if (recorded !== undefined) {
        if (isRecordedError(recorded)) throw engineError(recorded.error);
        event = recorded;
      } else if (this.#replayOnly) {
        return never();
      } else {
        const decision = await this.#ask("wf.wait", {
          name,
          count,
          type: options && options.type,
          timeout: options ? options.timeout : undefined,
        });
        if ("reject" in decision) throw engineError(decision.reject);
        event = JSONParse(decision.resolve);
      }
      return {
        payload: deserialize(event.payload),
        timestamp: new Date(event.timestamp),
        type: event.type,
      };
    }
  }

  /** run()'s value as status().output reports it: JSON, as wrangler dev stores it (Date as
   * its ISO string, Map and Set as {}, undefined as null), with wrangler dev's markers for
   * BigInt and typed arrays. Step results, unlike the output, keep structured-clone types. */
  function outputValue(value) {
    const text = JSONStringify(value, (key, v) => {
      if (typeof v === "bigint") return `[BigInt(${v})]`;
      if (ArrayBufferIsView(v)) return `[${v.constructor.name}(${v.byteLength} bytes)]`;
      return v;
    });
    return text === undefined ? null : JSONParse(text);
  }

  /** Run one attempt of a rollback handler, as the engine says (`wf.rollback`), and report
   * it (`wf.rbReport`). The handler gets the forward step's ctx, the error that triggered
   * the rollback, the step's output (undefined unless it succeeded) and its stepName. */
  host.on("wf.rollback", (message) => {
    const run = runOf(message);
    if (run === undefined || run.plan === null || !run.step) return;
    const report = (fields) =>
      host.notify("wf.rbReport", ObjectAssign({ g: message.g, r: run.r, key: message.key, attempt: message.attempt }, fields));
    let entry;
    for (let i = 0; i < run.plan.steps.length; i++) {
      if (run.plan.steps[i].rollbackKey === message.key) entry = run.plan.steps[i];
    }
    const handler = entry && run.step.rollbacks.get(entry.key);
    if (!handler) {
      report({ missing: true });
      return;
    }
    const args = {
      ctx: copyContext(entry.context),
      error: host.reviveError(run.plan.error),
      output: entry.output === null || entry.output === undefined ? undefined : revive(deserialize(entry.output)),
      stepName: entry.stepName,
    };
    PromisePrototypeThen(
      attemptOnce(run, message.key, () => handler.fn(args), handler.rawConfig, message.context, message.timeout, message.willRetry),
      (outcome) => report(outcome.unserializable ? { ok: true } : outcome.ok ? { ok: true } : outcome),
      (error) => report({ ok: false, error: host.describeError(error) }),
    );
  });

  // workflow name -> the error for a workflow whose class lives in a Worker not running
  // here (celld/bindings/unconnected.py), from the env message
  const unconnected = new SafeMap();
  globalThis.__celld_cloudflare.onEnv((message) => {
    for (const binding of message.workflows || []) {
      if (typeof binding.missing === "string") unconnected.set(binding.name, binding.missing);
    }
  });

  /** Start `run(event, step)` of the exported class for one instance. */
  host.on("wf.start", (message) => {
    const old = runs.get(message.r);
    if (old !== undefined) host.cancelOwned(old);
    const run = newRun(message.r, message.g);
    runs.set(message.r, run);
    run.mayBegin = message.speculate !== false;
    run.checkVersion = message.checkVersion === true;
    run.local = message.local === true;
    if (message.rules) stepRules = message.rules;
    const main = globalThis.__celld_main;
    const Workflow = main[message.className];
    const report = (fields) => {
      if (!run.dropped) host.notify("wf.done", ObjectAssign({ g: message.g, r: run.r }, fields));
    };
    const missing = unconnected.get(message.event.workflowName);
    if (missing !== undefined) {
      // its class lives in another Worker, which is not running here (wrangler dev's error)
      report({ error: { name: "Error", message: missing } });
      return;
    }
    if (typeof Workflow !== "function" || !(Workflow.prototype instanceof cloudflare.WorkflowEntrypoint)) {
      report({ error: { name: "Error", message: `The Worker does not export a class ${message.className} that extends WorkflowEntrypoint` } });
      return;
    }
    const fields = {
      payload: deserialize(message.event.payload),
      timestamp: new Date(message.event.timestamp),
      instanceId: message.event.instanceId,
      workflowName: message.event.workflowName,
    };
    // instances a cron schedule started: {cron, scheduledTime (epoch ms)}
    if (message.event.schedule) fields.schedule = ObjectFreeze(message.event.schedule);
    const event = ObjectFreeze(fields);
    const ctx = { waitUntil(promise) { PromisePrototypeThen(PromiseResolve(promise), undefined, () => {}); } };
    const plan = message.rollback || null;
    // (the journal comes as raw JSON inside the message, RawJson; JSON text is parsed here)
    const journal = typeof message.journal === "string" ? JSONParse(message.journal) : message.journal;
    const step = new WorkflowStep(run, journal, message.unfinished || [], message.stepLimit, plan !== null);
    run.step = step;
    run.plan = plan;
    const running = PromisePrototypeThen(PromiseResolve(undefined), () =>
      new Workflow(ctx, cloudflare.env).run(event, step),
    );
    if (plan !== null) {
      // Only to find the handlers again; how run() ends does not matter any more.
      PromisePrototypeThen(running, undefined, () => {});
      return;
    }
    PromisePrototypeThen(
      running,
      (output) => {
        let text;
        try {
          text = serialize(outputValue(output));
        } catch (error) {
          report({ error: { name: "Error", message: `The value returned from run() is not serialisable: ${error.message}` } });
          return;
        }
        report({ output: text });
      },
      (error) => report({ error: host.describeError(error) }),
    );
  });
})();
