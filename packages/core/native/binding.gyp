{
  "variables": {
    "fastpull_isal%": "<!(sh ./isal-probe.sh)"
  },
  "targets": [
    {
      "target_name": "fastpull_native",
      "sources": ["fastpull_native.c", "fastpull_files.c"],
      "cflags": ["-O2", "-Wall"]
    },
    {
      "target_name": "fastpull_inflate",
      "sources": ["fastpull_inflate.c"],
      "cflags!": ["-O2"],
      "cflags": ["-O3", "-Wall"]
    }
  ],
  "conditions": [
    ["fastpull_isal==1", {
      "targets": [
        {
          "target_name": "fastpull_isal",
          "sources": ["fastpull_isal.c"],
          "cflags": ["-O2", "-Wall"],
          "libraries": ["-lisal"]
        }
      ]
    }]
  ]
}
