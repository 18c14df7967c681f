"""An independent fastpulld client: stubs generated from fastpull.proto by grpc_tools, nothing else.

Usage: client.py STUBS_DIR SOCKET REFERENCE. Pulls REFERENCE, lists the images, removes it, lists
again, and prints one JSON object per step on stdout; a failed call prints its status and exits 1.
"""
import json
import sys

import grpc

sys.path.insert(0, sys.argv[1])
from fastpull.v1 import fastpull_pb2, fastpull_pb2_grpc  # noqa: E402

socket, reference = sys.argv[2], sys.argv[3]


def say(**kv):
    print(json.dumps(kv), flush=True)


with grpc.insecure_channel("unix:" + socket) as channel:
    images = fastpull_pb2_grpc.ImagesStub(channel)
    states = {}
    done = None
    for msg in images.Pull(fastpull_pb2.PullRequest(reference=reference), timeout=60):
        kind = msg.WhichOneof("event")
        if kind == "layer":
            states[msg.layer.index] = fastpull_pb2.LayerState.Name(msg.layer.state)
        elif kind == "done":
            done = msg.done
    say(step="pull", name=done.image.name, manifest=done.image.manifest.digest,
        layers=len(done.image.layers), states=sorted(set(states.values())), root=done.root)
    listed = images.List(fastpull_pb2.ListImagesRequest())
    say(step="list", names=[i.name for i in listed.images])
    removed = images.Remove(fastpull_pb2.RemoveImageRequest(name=reference))
    say(step="remove", name=removed.name)
    listed = images.List(fastpull_pb2.ListImagesRequest())
    say(step="list", names=[i.name for i in listed.images])
    try:
        images.Get(fastpull_pb2.GetImageRequest(name=reference))
        say(step="get", code="OK")
    except grpc.RpcError as e:
        trailers = dict(e.trailing_metadata() or ())
        say(step="get", code=e.code().name, fastpull_code=trailers.get("fastpull-code"), message=e.details())
