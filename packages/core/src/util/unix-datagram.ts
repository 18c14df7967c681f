// One datagram to a unix socket, which is how a service manager (systemd) takes notifications on
// $NOTIFY_SOCKET. Node has no unix datagram sockets, and handing the message to a helper process
// would make the helper its sender, which the manager may refuse: the native addon sends it.
import { nativeSendDatagram } from '../native/addon.js';

/**
 * Sends `data` as one datagram to the unix datagram socket at `address`: a path, or `@` followed by a
 * name in the abstract namespace, as systemd writes `$NOTIFY_SOCKET`. The sender is the calling
 * process. Throws an Error whose `code` is the errno name: `ENOENT` or `ECONNREFUSED` when nobody
 * listens there, `ENAMETOOLONG` for an address a unix socket address cannot hold, `EINVAL` for one
 * that is neither form, `EAGAIN` when the receiver's queue stayed full for 5 seconds.
 */
export type UnixDatagramSender = (address: string, data: Uint8Array) => void;

/**
 * The unix datagram sender of fastpull's native addon, or undefined where the addon is not built (or
 * is a build from before it had one); nothing is loaded twice.
 * @example
 * import { unixDatagramSender } from '@fastpull/core';
 *
 * const send = unixDatagramSender();
 * const address = process.env.NOTIFY_SOCKET;
 * if (send && address) send(address, Buffer.from('READY=1'));
 */
export function unixDatagramSender(): UnixDatagramSender | undefined {
  return nativeSendDatagram();
}
