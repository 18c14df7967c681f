// fastpulld's side of systemd's notification protocol (Type=notify units): $NOTIFY_SOCKET names a unix
// datagram socket where the service manager reads newline-separated KEY=VALUE fields. READY=1 goes
// out once both sockets take calls, so that units ordered after fastpulld (containerd) start only
// then; RELOADING=1 and READY=1 go around a reload, STOPPING=1 when it stops.
import { FastpullError, type UnixDatagramSender } from '@fastpull/core';

/** Tells the service manager what fastpulld is doing. */
export interface ServiceNotifier {
  /** The socket the messages go to. */
  readonly address: string;
  /** READY=1: both sockets take calls (or, after a reload, again). `status` is shown by `systemctl status`. */
  ready(status: string): void;
  /** RELOADING=1, with the monotonic clock's time as systemd 253's Type=notify-reload wants it. */
  reloading(): void;
  /** STOPPING=1: the shutdown began. */
  stopping(status: string): void;
}

/**
 * The notifier for `$NOTIFY_SOCKET`, sending with `send` (the native addon's unixDatagramSender()),
 * or undefined when it is not set. It is taken out of `env` either way: the programs fastpulld runs
 * (credential helpers, decoders) must not speak for it.
 *
 * Throws, for the start to stop at once rather than leave systemd waiting for a READY=1 that cannot
 * come: INVALID_ARGUMENT for an address that is neither a path nor an `@` abstract name, and
 * FAILED_PRECONDITION where the native addon that sends datagrams is not built (`send` undefined).
 * A send that fails later is handed to `onError`; fastpulld serves on.
 */
export function serviceNotifier(
  env: NodeJS.ProcessEnv,
  send: UnixDatagramSender | undefined,
  onError: (error: Error, message: string) => void,
): ServiceNotifier | undefined {
  const address = env.NOTIFY_SOCKET;
  delete env.NOTIFY_SOCKET;
  if (address === undefined || address === '') return undefined;
  if (!address.startsWith('/') && !(address.startsWith('@') && address.length > 1)) {
    throw new FastpullError(
      'INVALID_ARGUMENT',
      `NOTIFY_SOCKET ${JSON.stringify(address)}: fastpulld notifies a unix socket path or an @abstract name, not this`,
    );
  }
  if (send === undefined) {
    throw new FastpullError(
      'FAILED_PRECONDITION',
      "NOTIFY_SOCKET is set (a systemd unit of Type=notify), but fastpull's native addon, which sends the notification, is not built: " +
        'build it (npm rebuild -g @fastpull/core; it needs python3, make and a C compiler), or run fastpulld with Type=exec ' +
        '(systemctl edit fastpulld: [Service] Type=exec), with which units ordered after fastpulld no longer wait for its sockets',
    );
  }
  const post = (message: string): void => {
    try {
      send(address, Buffer.from(message));
    } catch (e) {
      onError(e instanceof Error ? e : new Error(String(e)), message);
    }
  };
  // A field is one line: a newline in a path would start a field of its own.
  const line = (text: string): string => text.replace(/[\r\n]+/g, ' ');
  return {
    address,
    ready: (status) => post(`READY=1\nSTATUS=${line(status)}`),
    reloading: () => post(`RELOADING=1\nMONOTONIC_USEC=${process.hrtime.bigint() / 1000n}`),
    stopping: (status) => post(`STOPPING=1\nSTATUS=${line(status)}`),
  };
}
