// Bodies that stream between the isolate and the host (celld/isolate/streams.py).
//
// From the host: a *source* (a request body, an R2 object, a fetch() response) becomes a
// ReadableStream whose every pull reads one piece (`stream.read`), with the next piece
// asked for ahead, so the host reads while JS works. A stream nobody has read
// yet can be handed back to the host whole (`takeHostSource`): an R2 object returned as a
// response, or a request body put into R2, never enters the isolate.
//
// To the host: `openPipe` names a pipe, `pumpToHost` reads a stream and writes it there
// piece by piece (`pipe.write`), with at most WINDOW writes unanswered. The host answers
// a write only while it has room, so the stream is read (its `pull` called) no faster
// than the consumer (a slow client, a disk) takes the bytes.
//
// Pieces cross as base64 (the bridge carries JSON text), at most PIECE_BYTES each to the host.
"use strict";
(() => {
  const { PromisePrototypeThen, PromiseResolve, Promise, TypeError } = globalThis.__celld_primordials;
  const web = globalThis.__celld_web;
  const host = globalThis.__celld_host;

  const PIECE_BYTES = 65536;
  /** Pipe writes in flight at once (each at most PIECE_BYTES). */
  const WINDOW = 4;

  let pipePrefix = null;
  let pipeCount = 0;

  /** A pipe id no other isolate of this process will choose. */
  function newPipeId() {
    if (pipePrefix === null) {
      let hex = "p";
      const bytes = web.randomBytes(8);
      for (let i = 0; i < bytes.length; i++) hex += (bytes[i] < 16 ? "0" : "") + bytes[i].toString(16);
      pipePrefix = `${hex}-`;
    }
    pipeCount += 1;
    return pipePrefix + pipeCount.toString(36);
  }

  /** A ReadableStream over host source `id` (`length`: its size when known). Released
   * (the host closes it) when cancelled, or when `owner`'s request ends unread. */
  function fromHost(id, length = null, owner = host.owner()) {
    let over = false;
    let forget = null;
    let ahead = null; // the next piece, asked for as soon as the last one arrived
    const finish = () => {
      over = true;
      if (forget !== null) forget();
    };
    const read = () => {
      const asked = host.request("stream.read", { s: id });
      PromisePrototypeThen(asked, undefined, () => {}); // (handled where it is used)
      return asked;
    };
    const stream = new ReadableStream({
      pull(controller) {
        const asked = ahead !== null ? ahead : read();
        ahead = null;
        return PromisePrototypeThen(
          asked,
          (piece) => {
            if (piece === null) {
              finish();
              controller.close();
            } else {
              controller.enqueue(web.base64ToBytes(piece));
              if (!over) ahead = read();
            }
          },
          (error) => {
            finish();
            throw error;
          },
        );
      },
      cancel() {
        if (over) return;
        finish();
        host.notify("stream.cancel", { s: id });
      },
    });
    web.markHostSource(stream, id, length);
    // (A source a host consumer took is no longer the host's to cancel by this id: the
    // notification is then a no-op there.)
    forget = host.onRelease(owner, () => {
      if (over) return;
      over = true;
      host.notify("stream.cancel", { s: id });
    });
    return stream;
  }

  /** Name a new pipe to the host; bytes are then sent with pumpToHost. */
  function openPipe() {
    const id = newPipeId();
    host.notify("pipe.open", { p: id });
    return id;
  }

  function asBytes(value) {
    if (value instanceof Uint8Array) return value;
    const view = web.bufferSourceView(value);
    if (view === null) throw new TypeError("This ReadableStream did not return bytes.");
    return view;
  }

  /**
   * Read `stream` to its end into pipe `id`, as `owner` (its pulls belong to that
   * request). Resolves once every piece was accepted and the pipe closed; rejects (after
   * cancelling the stream and aborting the pipe) when the stream errors or the host's
   * consumer went away.
   */
  function pumpToHost(id, stream, owner) {
    const reader = web.openStream(stream);
    return new Promise((settle, reject) => {
      let inflight = 0;
      let reading = false;
      let ended = false;
      let failed = false;
      let chunk = null;
      let offset = 0;

      // The request ends first (its client went away): stop reading.
      const forget = host.onRelease(owner, () => {
        fail(new TypeError("The request ended before its response body was sent."));
      });
      const resolve = () => {
        forget();
        settle();
      };
      const fail = (error) => {
        if (failed) return;
        failed = true;
        forget();
        try {
          host.notify("pipe.abort", { p: id, error: host.describeError(error) });
        } finally {
          PromisePrototypeThen(PromiseResolve(reader.cancel(error)), undefined, () => {});
          reject(error);
        }
      };

      const wrote = () => {
        inflight -= 1;
        if (failed) return;
        if (ended) {
          if (inflight === 0) resolve();
          return;
        }
        send();
      };

      const send = () => {
        while (!failed && chunk !== null && inflight < WINDOW) {
          const end = offset + PIECE_BYTES < chunk.length ? offset + PIECE_BYTES : chunk.length;
          const piece = chunk.subarray(offset, end);
          offset = end;
          if (offset >= chunk.length) chunk = null;
          inflight += 1;
          PromisePrototypeThen(host.requestBytes("pipe.write", { p: id }, "d", piece), wrote, fail);
        }
        if (!failed && !ended && !reading && chunk === null && inflight < WINDOW) read();
      };

      const read = () => {
        reading = true;
        let next;
        try {
          next = host.runAs(owner, () => reader.read());
        } catch (error) {
          fail(error);
          return;
        }
        PromisePrototypeThen(next, (result) => {
          reading = false;
          if (failed) return;
          if (result.done) {
            ended = true;
            host.notify("pipe.close", { p: id });
            if (inflight === 0) resolve();
            return;
          }
          let bytes;
          try {
            bytes = asBytes(result.value);
          } catch (error) {
            fail(error);
            return;
          }
          if (bytes.length > 0) {
            chunk = bytes;
            offset = 0;
          }
          send();
        }, fail);
      };

      send();
    });
  }

  web.fromHost = fromHost;
  web.openPipe = openPipe;
  web.pumpToHost = pumpToHost;
  web.PIECE_BYTES = PIECE_BYTES;
})();
