// What a conformance suite is made of: named cases, each run against a fresh store from a factory, with
// node:assert (no test runner): a test file of any runner turns each case into one test.
import assert from 'node:assert/strict';
import { isFastpullError, type ErrorCode } from '../../errors.js';

/** A store under test, fresh for one case, and how to let go of it. */
export interface Subject<T> {
  /** The store. */
  readonly store: T;
  /** Frees what the factory made (temporary directories); called after the case, passed or not. */
  readonly cleanup: () => Promise<void>;
}

/** Makes a fresh, empty store for one case. */
export type SubjectFactory<T> = () => Promise<Subject<T>>;

/** One case of a conformance suite: a behaviour every implementation must show. */
export interface ConformanceCase {
  /** What it checks, as a test's name. */
  readonly name: string;
  /** Runs it on a fresh store; rejects with an assertion error when the implementation differs. */
  readonly run: () => Promise<void>;
}

/**
 * A case that runs `body` on a fresh store from `factory` and always cleans up.
 * @example
 * const c = conformanceCase(factory, 'lists nothing when empty', async (store) => assert.deepEqual(await store.list(), []));
 */
export function conformanceCase<T>(factory: SubjectFactory<T>, name: string, body: (store: T) => Promise<void>): ConformanceCase {
  return {
    name,
    run: async () => {
      const subject = await factory();
      try {
        await body(subject.store);
      } finally {
        await subject.cleanup();
      }
    },
  };
}

/**
 * Asserts that `p` (a promise, or a function that throws or returns one) fails with a FastpullError
 * of `code`; returns the error.
 * @example
 * await rejectsWithCode(store.readBytes(absent), 'NOT_FOUND', 'readBytes of an absent blob');
 */
export async function rejectsWithCode(p: Promise<unknown> | (() => unknown), code: ErrorCode, what: string): Promise<Error> {
  let error: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    error = e;
  }
  assert.ok(error !== undefined, `${what}: resolved, want ${code}`);
  assert.ok(isFastpullError(error), `${what}: threw ${String(error)}, want a FastpullError ${code}`);
  assert.equal(error.code, code, `${what}: code ${error.code} (${error.message}), want ${code}`);
  return error;
}
