/** The most calls one call of `many` is given; more wait for the next. */
const MOST_AT_ONCE = 256;

interface Call<I, O> {
  input: I;
  resolve: (output: O) => void;
  reject: (error: unknown) => void;
}

/**
 * A function of one input whose calls made in one turn of the event loop are made as one call of `many`, at
 * the turn's end (setImmediate; with `soon: 'tick'`, at the process.nextTick after the first call: the calls made
 * by the promises settled in the same callback go with it, if the first was made after an await too), with their
 * inputs in the order of the calls; each call gets its own output
 * (`many` answers one per input, in order), or the error of the call they shared. At most `parallel` calls of
 * `many` run at once (default 1): what comes while that many run waits, and goes in the next one with everything
 * else that came meanwhile (at most MOST_AT_ONCE inputs a call).
 *
 * The stores record the replay guard's ids this way (kysely/assertion-jtis.ts): the token requests of
 * a turn are answered together (endOfTurn, src/http/routes/token.ts), each records its proof's id in that turn,
 * and one transaction records them all, with one commit (on SQLite, one wait for the write lock; on PostgreSQL,
 * one round trip) instead of one of each per request. In Redis (limits/replay.ts), one command, sent at the tick:
 * the requests of a turn are resumed in one callback (endOfTurn), so a DPoP proof's id (verified synchronously)
 * is in the tick's command with the others; a client assertion's (jose verifies with WebCrypto, each in a callback
 * of its own) goes with those its callback completed. Against the turn's end: DPoP with Redis 1.14-1.15x the
 * requests a second, private_key_jwt 0.95-0.99x (bench, --compare, three rounds).
 */
export function perTurn<I, O>(
  many: (inputs: I[]) => Promise<O[]>,
  options: { parallel?: number; soon?: 'immediate' | 'tick' } = {},
): (input: I) => Promise<O> {
  const parallel = options.parallel ?? 1;
  const later = options.soon === 'tick' ? process.nextTick : setImmediate;
  let waiting: Call<I, O>[] = [];
  let scheduled = false;
  let running = 0;

  const runOne = (): void => {
    const calls = waiting.slice(0, MOST_AT_ONCE);
    waiting = waiting.slice(calls.length);
    running++;
    let answered: Promise<O[]>;
    try {
      answered = many(calls.map((call) => call.input));
    } catch (error) {
      answered = Promise.reject(error);
    }
    answered
      .then((outputs) => {
        if (outputs.length !== calls.length)
          throw new Error(`${outputs.length} answers to ${calls.length} calls`);
        calls.forEach((call, i) => call.resolve(outputs[i]!));
      })
      .catch((error: unknown) => {
        for (const call of calls) call.reject(error);
      })
      .finally(() => {
        running--;
        run();
      });
  };

  const run = (): void => {
    scheduled = false;
    while (running < parallel && waiting.length > 0) runOne();
  };

  return (input) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      if (!scheduled && running < parallel) {
        scheduled = true;
        later(run);
      }
    });
}
