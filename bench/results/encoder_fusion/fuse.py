"""The int8 model's ONNX encoder graph as exported (ONNX Runtime optimizes it at ORT_ENABLE_ALL) against the same
graph through onnxruntime.transformers' BERT fusions (Attention, EmbedLayerNormalization, SkipLayerNormalization,
BiasGelu), on the encoder batches of a folder's chunks at 1,024 padded tokens. CPU seconds, one thread, three
alternated rounds; max |diff| over real tokens and the worst cosine of the mean-pooled states. A scratch script
of the lab note (performance-history.md): the script that ran, its paths made arguments and formatted:

    taskset -c 1 env OMP_NUM_THREADS=1 python fuse.py CACHE/onnx/KEY/encoder-fp32.onnx FOLDER OUT.onnx
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnxruntime.transformers.optimizer import optimize_model

src = Path(sys.argv[1])
folder = Path(sys.argv[2])
out = Path(sys.argv[3])
if not out.exists():
    m = optimize_model(str(src), model_type="bert", num_heads=12, hidden_size=384, opt_level=0)
    print("fusion stats", m.get_fused_operator_statistics())
    m.save_model_to_file(str(out))
import collections

import onnx

g = onnx.load(str(out), load_external_data=False)
print("fused ops", dict(collections.Counter((n.domain or "") + ":" + n.op_type for n in g.graph.node).most_common(12)))


def sess(p):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(p), o, providers=["CPUExecutionProvider"])


a, b = sess(src), sess(out)
from c2v_rag.documents.chunking import TokenChunker
from c2v_rag.hub.sources import load_tokenizer, resolve_reference

ch = TokenChunker.for_variant(None, 200, 20, lead=True)
texts = [c.text for p in sorted(folder.iterdir()) for c in ch.iter_chunks(p.read_text())]
tok = load_tokenizer(resolve_reference("all-minilm-l6-v2"))
enc = [tok(t, truncation=True, max_length=256)["input_ids"] for t in texts]
order = sorted(range(len(enc)), key=lambda i: len(enc[i]))
batches, cur = [], []
for i in order:
    if cur and (len(cur) + 1) * len(enc[i]) > 1024:
        batches.append(cur)
        cur = []
    cur.append(i)
batches.append(cur)
feeds = []
for bt in batches:
    L = max(len(enc[i]) for i in bt)
    ids = np.zeros((len(bt), L), np.int64)
    mask = np.zeros_like(ids)
    for r, i in enumerate(bt):
        ids[r, : len(enc[i])] = enc[i]
        mask[r, : len(enc[i])] = 1
    feeds.append({"input_ids": ids, "attention_mask": mask})
print(len(texts), "chunks", len(batches), "batches")


def run(s):
    t = time.process_time()
    outs = [s.run(None, f)[0] for f in feeds]
    return time.process_time() - t, outs


run(a)
run(b)
times = {"today": [], "fused": []}
for rep in range(3):
    for name, s in (("today", a), ("fused", b)) if rep % 2 == 0 else (("fused", b), ("today", a)):
        t, o = run(s)
        times[name].append(t)
        if name == "today":
            oa = o
        else:
            ob = o
diff = max(float(np.abs((x - y)[f["attention_mask"].astype(bool)]).max()) for x, y, f in zip(oa, ob, feeds))


def pool(o, f):
    m = f["attention_mask"][..., None]
    return (o * m).sum(1) / m.sum(1)


cos = []
for x, y, f in zip(oa, ob, feeds):
    px, py = pool(x, f), pool(y, f)
    cos += list((px * py).sum(1) / np.linalg.norm(px, axis=1) / np.linalg.norm(py, axis=1))
print(
    json.dumps(
        {
            "times": times,
            "speedup_median": float(np.median(times["today"]) / np.median(times["fused"])),
            "max_abs_diff_real_tokens": diff,
            "worst_pooled_cos": float(min(cos)),
        }
    )
)
