// What fastpull_files.c shares with fastpull_native.c, the addon it is built into.
#ifndef FASTPULL_FILES_H
#define FASTPULL_FILES_H
#include <node_api.h>

// An Error as the addon's calls throw them: code (the errno's name), errno, syscall, path.
napi_value fastpull_errno_error(napi_env env, int err, const char* syscall, const char* path);
// Throws that error; returns NULL.
napi_value fastpull_throw_errno(napi_env env, int err, const char* syscall, const char* path);
// Adds the file sink's calls (fileSink*) to the addon's exports.
void fastpull_files_init(napi_env env, napi_value exports);
#endif
