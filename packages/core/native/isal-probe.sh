#!/bin/sh
# Prints 1 when the C compiler can build and link against libisal (Debian/Ubuntu libisal-dev), else 0:
# binding.gyp builds the in-process ISA-L inflater (fastpull_isal) only then. FASTPULL_SKIP_ISAL=1 prints 0.
[ "${FASTPULL_SKIP_ISAL:-}" = 1 ] && { echo 0; exit 0; }
t=$(mktemp -d 2>/dev/null) || { echo 0; exit 0; }
printf '#include <isa-l/igzip_lib.h>\nint main(void) { struct inflate_state s; isal_inflate_init(&s); return 0; }\n' >"$t/probe.c"
if ${CC:-cc} "$t/probe.c" -o "$t/probe" -lisal >/dev/null 2>&1; then echo 1; else echo 0; fi
rm -rf "$t"
