// fastpulld: the long-lived pull service. Its gRPC API over a unix socket is built by its own issue;
// until then this package only re-exports the library version it serves.
export { VERSION } from '@fastpull/core';
