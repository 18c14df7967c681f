{
  "targets": [
    {
      "target_name": "fastpull_native",
      "sources": ["fastpull_native.c"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
