{
  "targets": [
    {
      "target_name": "fastpull_native",
      "sources": ["fastpull_native.c"],
      "cflags": ["-O2", "-Wall"]
    },
    {
      "target_name": "fastpull_inflate",
      "sources": ["fastpull_inflate.c"],
      "cflags!": ["-O2"],
      "cflags": ["-O3", "-Wall"]
    }
  ]
}
