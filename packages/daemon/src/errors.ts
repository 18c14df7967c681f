// fastpull's error codes on the wire: each library code maps onto one gRPC status code, and travels
// itself in the trailing metadata (`fastpull-code`, with `fastpull-details` as JSON), so a client in any
// language can tell INVALID_REFERENCE from INVALID_DIGEST and the TypeScript client rebuilds the same
// FastpullError.
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { Metadata, status as Status, type ServiceError, type StatusObject } from '@grpc/grpc-js';
import { asFastpullError, ErrorCodes, FastpullError, isFastpullError, type ErrorCode } from '@fastpull/core';

/** Trailing metadata key holding the library's error code. */
export const CODE_METADATA_KEY = 'fastpull-code';
/** Trailing metadata key holding the error's details as a JSON object. */
export const DETAILS_METADATA_KEY = 'fastpull-details';

/**
 * The gRPC status of each library code. Several codes share a status (the metadata tells them
 * apart); each code has exactly one. Classes as containerd's errdefs uses them: the caller's input
 * is INVALID_ARGUMENT, a missing thing NOT_FOUND, content the registry served that cannot be used
 * FAILED_PRECONDITION, a registry that cannot be reached UNAVAILABLE.
 */
export const GRPC_STATUS: Readonly<Record<ErrorCode, Status>> = {
  INVALID_ARGUMENT: Status.INVALID_ARGUMENT,
  INVALID_REFERENCE: Status.INVALID_ARGUMENT,
  INVALID_DIGEST: Status.INVALID_ARGUMENT,
  INVALID_MANIFEST: Status.INVALID_ARGUMENT,
  INVALID_LAYER: Status.INVALID_ARGUMENT,
  MANIFEST_TOO_LARGE: Status.FAILED_PRECONDITION,
  UNSUPPORTED_MEDIA_TYPE: Status.FAILED_PRECONDITION,
  PLATFORM_NOT_FOUND: Status.NOT_FOUND,
  NOT_FOUND: Status.NOT_FOUND,
  UNAUTHORIZED: Status.UNAUTHENTICATED,
  DENIED: Status.PERMISSION_DENIED,
  RATE_LIMITED: Status.RESOURCE_EXHAUSTED,
  REGISTRY_ERROR: Status.UNAVAILABLE,
  NETWORK_ERROR: Status.UNAVAILABLE,
  INSECURE_REGISTRY: Status.FAILED_PRECONDITION,
  DIGEST_MISMATCH: Status.DATA_LOSS,
  SIZE_MISMATCH: Status.DATA_LOSS,
  HOSTILE_LAYER: Status.FAILED_PRECONDITION,
  NO_SPACE: Status.RESOURCE_EXHAUSTED,
  PERMISSION_DENIED: Status.PERMISSION_DENIED,
  ABORTED: Status.CANCELLED,
  INTERNAL: Status.INTERNAL,
  ALREADY_EXISTS: Status.ALREADY_EXISTS,
  FAILED_PRECONDITION: Status.FAILED_PRECONDITION,
  SIGNATURE_MISSING: Status.FAILED_PRECONDITION,
  SIGNATURE_INVALID: Status.FAILED_PRECONDITION,
  TOO_MANY_LAYERS: Status.FAILED_PRECONDITION,
};

/**
 * For a status without `fastpull-code` (from the transport, or a server that is not fastpulld):
 * the library code that best says what happened.
 */
const CODE_OF_STATUS: Readonly<Partial<Record<Status, ErrorCode>>> = {
  [Status.INVALID_ARGUMENT]: 'INVALID_ARGUMENT',
  [Status.NOT_FOUND]: 'NOT_FOUND',
  [Status.ALREADY_EXISTS]: 'ALREADY_EXISTS',
  [Status.FAILED_PRECONDITION]: 'FAILED_PRECONDITION',
  [Status.UNAUTHENTICATED]: 'UNAUTHORIZED',
  [Status.PERMISSION_DENIED]: 'PERMISSION_DENIED',
  [Status.RESOURCE_EXHAUSTED]: 'RATE_LIMITED',
  [Status.CANCELLED]: 'ABORTED',
  [Status.DATA_LOSS]: 'DIGEST_MISMATCH',
  [Status.UNAVAILABLE]: 'NETWORK_ERROR',
  [Status.DEADLINE_EXCEEDED]: 'NETWORK_ERROR',
};

/** Characters of an error's message sent in the status (grpc-message, a header); more is cut, marked by "…". */
export const MAX_STATUS_MESSAGE = 2048;
/**
 * Bytes of an error's details sent as `fastpull-details` (a header too). A client refuses a response
 * whose headers pass its limit (grpc-js: 8 KiB by default, including this one) and then loses the
 * error's code as well; details are for reading, so past the bound the biggest fields go, named in
 * `truncated`.
 */
export const MAX_STATUS_DETAILS = 4096;

/** The gRPC status a failure is sent as. Anything that is not a FastpullError is INTERNAL. */
export function toStatus(e: unknown): Partial<StatusObject> & { code: Status; details: string; metadata: Metadata } {
  const fe = asFastpullError(e);
  const metadata = new Metadata();
  metadata.set(CODE_METADATA_KEY, fe.code);
  metadata.set(DETAILS_METADATA_KEY, boundedDetails(fe.details));
  const message = fe.message.length > MAX_STATUS_MESSAGE ? `${fe.message.slice(0, MAX_STATUS_MESSAGE)}…` : fe.message;
  return { code: GRPC_STATUS[fe.code], details: message, metadata };
}

/** Metadata values must be printable ASCII: the rest escaped as JSON does. undefined where JSON leaves the value out. */
function asciiJSON(value: unknown): string | undefined {
  return JSON.stringify(value)?.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** The details as ASCII JSON of at most MAX_STATUS_DETAILS bytes: whole if they fit, else without their largest fields. */
function boundedDetails(details: unknown): string {
  let whole: string | undefined;
  try {
    whole = asciiJSON(details);
  } catch {
    // Details that do not serialise are left out, never the error.
    return '{}';
  }
  if (whole === undefined) return '{}';
  if (whole.length <= MAX_STATUS_DETAILS) return whole;
  if (typeof details !== 'object' || details === null || Array.isArray(details)) return '{"truncated":true}';
  const fields = Object.entries(details as Record<string, unknown>).flatMap(([key, value]) => {
    const json = safeJSON(value);
    return json === null ? [] : [{ key, value, size: json === undefined ? Infinity : json.length + (asciiJSON(key)?.length ?? 0) + 2 }];
  });
  // Room for every key named in `truncated`, the worst case; then the smallest fields first, so as many as fit are kept.
  let room = MAX_STATUS_DETAILS - (asciiJSON({ truncated: fields.map((f) => f.key) })?.length ?? 0);
  fields.sort((a, b) => a.size - b.size || (a.key < b.key ? -1 : 1));
  const kept: Record<string, unknown> = {};
  const truncated: string[] = [];
  for (const f of fields) {
    if (f.size <= room) {
      kept[f.key] = f.value;
      room -= f.size;
    } else truncated.push(f.key);
  }
  return asciiJSON({ ...kept, truncated: truncated.sort() }) ?? '{}';
}

/** A value as ASCII JSON; null where JSON leaves it out, undefined where it does not serialise. */
function safeJSON(value: unknown): string | null | undefined {
  try {
    return asciiJSON(value) ?? null;
  } catch {
    return undefined;
  }
}

/**
 * Rebuilds the library error from a failed call: same code and message, details when sent. With
 * `address`, a call that never reached a server says that no fastpulld listens there, instead of the
 * transport's own text.
 */
export function fromServiceError(e: unknown, what: string, address?: string): FastpullError {
  if (isFastpullError(e)) return e;
  const se = e as Partial<ServiceError>;
  if (typeof se.code !== 'number') return new FastpullError('INTERNAL', `${what}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  const sent = se.metadata?.get(CODE_METADATA_KEY)[0];
  const code = typeof sent === 'string' && (ErrorCodes as readonly string[]).includes(sent) ? (sent as ErrorCode) : undefined;
  if (code) {
    let details: Record<string, unknown> = {};
    const raw = se.metadata?.get(DETAILS_METADATA_KEY)[0];
    if (typeof raw === 'string') {
      try {
        const parsed: unknown = JSON.parse(raw);
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) details = parsed as Record<string, unknown>;
      } catch {
        // Unreadable details: the code and message still say what happened.
      }
    }
    return new FastpullError(code, se.details ?? se.message ?? 'unknown error', { details, cause: e });
  }
  if (address !== undefined && se.code === Status.UNAVAILABLE) {
    const path = address.replace(/^unix:/, '');
    const refused = socketRefusal(path);
    if (refused) {
      return new FastpullError(
        'PERMISSION_DENIED',
        `${what}: this user may not connect to fastpulld at ${path} (${refused}); run as root or as a member of the socket's group (fastpulld's \`group\` setting)`,
        {
          cause: e,
          details: { grpcCode: se.code },
        },
      );
    }
    if (closedByServer(se.details ?? se.message ?? '', path)) {
      return new FastpullError(
        'NETWORK_ERROR',
        `${what}: fastpulld at ${path} closed the connection before answering: it takes no more connections now (its max_connections), or it is stopping; try again, or raise max_connections`,
        {
          cause: e,
          details: { grpcCode: se.code },
        },
      );
    }
    return new FastpullError(
      'NETWORK_ERROR',
      `${what}: no fastpulld listens at ${path}; start it (fastpulld --socket ${path}) or leave out --address and FASTPULL_ADDRESS to work on the store directly`,
      {
        cause: e,
        details: { grpcCode: se.code },
      },
    );
  }
  const fallback = CODE_OF_STATUS[se.code] ?? 'INTERNAL';
  return new FastpullError(fallback, `${what}: ${se.details || se.message || 'call failed'} (gRPC ${Status[se.code] ?? se.code})`, {
    cause: e,
    details: { grpcCode: se.code },
  });
}

/**
 * Whether a call that never got through was hung up on by a server at the unix socket `path`, rather
 * than refused by the system: the transport names the errno (ECONNREFUSED for a socket nobody
 * listens on, ENOENT for none) only when connect() failed; a connection accepted and then closed,
 * as fastpulld does past its connection limit, fails with none.
 */
function closedByServer(text: string, path: string): boolean {
  if (/\bE[A-Z]{3,}\b/.test(text)) return false;
  try {
    return statSync(path).isSocket();
  } catch {
    return false;
  }
}

/**
 * Why this process may not connect to the unix socket at `path`, when that is why a call never got
 * through (connecting needs search permission on its directories and write permission on the
 * socket); undefined when there is no such socket or nothing stops this process.
 */
function socketRefusal(path: string): string | undefined {
  try {
    const st = statSync(path);
    if (!st.isSocket()) return undefined;
    accessSync(path, fsConstants.W_OK);
    return undefined;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code !== 'EACCES' && err.code !== 'EPERM') return undefined;
    try {
      const st = statSync(path);
      return `the socket is owned by uid ${st.uid}, gid ${st.gid}, mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}`;
    } catch {
      return 'a directory on the way to the socket is closed to this user';
    }
  }
}
