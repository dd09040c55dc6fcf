#!/usr/bin/env python3
"""Records llama-quantize's type choices for small models qforge makes itself.

    python3 tests/presets/gen.py --llama-quantize PATH/TO/llama-quantize [--work DIR]

Writes tests/presets/expected.json: for every model below (names, shapes, metadata) and every
preset llama-quantize lists (with and without an importance matrix, and a few option sets),
the type llama-quantize gave each tensor and the general.file_type it wrote, or the error it
stopped with. qforge-presets' tests check its plan against this file.

    python3 tests/presets/gen.py --llama-quantize LQ --check-bytes target/release/qforge

instead converts each model with llama-quantize and with `qforge convert --preset` for every
case (2 threads each) and prints how many output files are byte-identical, and which tensors
differ in the others; expected.json is left alone.

llama-quantize is built from llama.cpp's public source beside the project (never committed);
the version used is written into the JSON. Needs numpy and gguf (gguf-py).
"""
import argparse, json, os, struct, subprocess, sys, tempfile
import numpy as np
import gguf

# Models: (name, arch, hparams, layer tensors(embd, ff, n_head, n_kv, head_dim), extras)
def llama_like(name, arch, n_layer, embd, ff, n_head, n_kv, vocab, tied, experts=0, qkv=False, extra_norms=()):
    head = embd // n_head
    t = [("token_embd.weight", [vocab, embd], "f16"), ("output_norm.weight", [embd], "f32")]
    if not tied:
        t.append(("output.weight", [vocab, embd], "f16"))
    for i in range(n_layer):
        b = f"blk.{i}."
        t.append((b + "attn_norm.weight", [embd], "f32"))
        if qkv:
            t.append((b + "attn_qkv.weight", [embd + 2 * n_kv * head, embd], "f16"))
        else:
            t.append((b + "attn_q.weight", [n_head * head, embd], "f16"))
            t.append((b + "attn_k.weight", [n_kv * head, embd], "f16"))
            t.append((b + "attn_v.weight", [n_kv * head, embd], "f16"))
        t.append((b + "attn_output.weight", [embd, n_head * head], "f16"))
        for n in extra_norms:
            t.append((b + n, [embd], "f32"))
        t.append((b + "ffn_norm.weight", [embd], "f32"))
        if experts:
            t.append((b + "ffn_gate_inp.weight", [experts, embd], "f32"))
            t.append((b + "ffn_gate_exps.weight", [experts, ff, embd], "f16"))
            t.append((b + "ffn_up_exps.weight", [experts, ff, embd], "f16"))
            t.append((b + "ffn_down_exps.weight", [experts, embd, ff], "f16"))
        else:
            t.append((b + "ffn_gate.weight", [ff, embd], "f16"))
            t.append((b + "ffn_up.weight", [ff, embd], "f16"))
            t.append((b + "ffn_down.weight", [embd, ff], "f16"))
    hp = {"n_layer": n_layer, "n_embd": embd, "n_ff": ff, "n_head": n_head, "n_head_kv": n_kv, "n_expert": experts}
    return {"name": name, "arch": arch, "hparams": hp, "tensors": t}

MODELS = [
    # GQA 4 (attn_v gets Q4_K-class types), untied output, ffn rows of 640 (not whole 256 blocks).
    llama_like("llama-gqa4", "llama", 8, 256, 640, 8, 2, 384, tied=False),
    # Multi-head attention, tied embeddings (token_embd takes the output rules), 16 layers.
    llama_like("llama-mha-tied", "llama", 16, 256, 512, 4, 4, 320, tied=True),
    # Qwen2-style: GQA 2, 12 layers, embd 320 (no 256-blocks at all: every K/IQ type falls back).
    llama_like("qwen2-embd320", "qwen2", 12, 320, 768, 4, 2, 512, tied=False),
    # Gemma-style: tied, extra norms, 10 layers.
    llama_like("gemma2-tied", "gemma2", 10, 256, 512, 4, 1, 384, tied=True,
               extra_norms=("post_attention_norm.weight", "post_ffw_norm.weight")),
    # MoE: 8 experts (the n_expert == 8 rules, MXFP4_MOE's expert tensors), 8 layers.
    llama_like("llama-moe8", "llama", 8, 256, 256, 4, 2, 256, tied=False, experts=8),
    # Falcon-style fused qkv.
    llama_like("falcon-qkv", "falcon", 8, 256, 1024, 4, 1, 256, tied=False, qkv=True),
]

def write_model(m, path):
    w = gguf.GGUFWriter(path, m["arch"])
    a, hp = m["arch"], m["hparams"]
    w.add_name(m["name"])
    w.add_context_length(256)
    w.add_embedding_length(hp["n_embd"])
    w.add_block_count(hp["n_layer"])
    w.add_feed_forward_length(hp["n_ff"])
    w.add_head_count(hp["n_head"])
    w.add_head_count_kv(hp["n_head_kv"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_layer_norm_eps(1e-5)
    w.add_rope_dimension_count(hp["n_embd"] // hp["n_head"])
    if hp["n_expert"]:
        w.add_expert_count(hp["n_expert"])
        w.add_expert_used_count(2)
    w.add_file_type(1)
    rng = np.random.default_rng(len(m["name"]))
    for name, dims, ty in m["tensors"]:
        x = rng.standard_normal(dims).astype(np.float32) * 0.05
        w.add_tensor(name, x.astype(np.float16) if ty == "f16" else x)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

def write_imatrix(m, path):
    """llama.cpp's legacy imatrix .dat: count, then per entry name, ncall, nval, values."""
    rng = np.random.default_rng(7)
    entries = [(n, d) for n, d, t in m["tensors"] if len(d) >= 2]
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(entries)))
        for n, d in entries:
            cols = d[-1] * (d[0] if len(d) == 3 else 1)
            b = n.encode()
            f.write(struct.pack("<i", len(b))); f.write(b)
            f.write(struct.pack("<ii", 1, cols))
            f.write((rng.random(cols).astype(np.float32) + 0.1).tobytes())
        f.write(struct.pack("<i", 1)); ds = b"qforge"; f.write(struct.pack("<i", len(ds))); f.write(ds)

PRESETS = ["Q1_0", "Q2_0", "Q4_0", "Q4_1", "MXFP4_MOE", "Q5_0", "Q5_1", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M",
           "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0", "Q2_K", "Q2_K_S", "IQ3_XXS", "IQ3_S", "IQ3_M", "Q3_K", "IQ3_XS",
           "Q3_K_S", "Q3_K_M", "Q3_K_L", "IQ4_NL", "IQ4_XS", "Q4_K", "Q4_K_S", "Q4_K_M", "Q5_K", "Q5_K_S",
           "Q5_K_M", "Q6_K", "Q8_0", "F16", "BF16", "F32"]
# (label suffix, extra llama-quantize args, applies to presets)
OPTION_SETS = [
    ("--pure", ["--pure"], ["Q4_K_M", "Q3_K_M", "IQ4_XS"]),
    ("--leave-output-tensor", ["--leave-output-tensor"], ["Q4_K_M", "Q2_K"]),
    ("--output-tensor-type q8_0 --token-embedding-type q4_0",
     ["--output-tensor-type", "q8_0", "--token-embedding-type", "q4_0"], ["Q4_K_M", "IQ3_M"]),
    ("--tensor-type attn_v=q8_0 --tensor-type ffn_down=q5_k",
     ["--tensor-type", "attn_v=q8_0", "--tensor-type", "ffn_down=q5_k"], ["Q4_K_M", "Q3_K_S"]),
]

def types_of(path):
    r = gguf.GGUFReader(path)
    ft = r.get_field("general.file_type")
    return ({t.name: t.tensor_type.name.lower() for t in r.tensors},
            [t.name for t in r.tensors], int(ft.parts[ft.data[0]][0]) if ft else None)

def run(lq, m, src, dst, preset, extra, imatrix, orders):
    """One llama-quantize run: the types in the model's tensor order (one string), the
    file_type, and (checked equal across runs) the order llama-quantize wrote the tensors in."""
    args = [lq] + extra + (["--imatrix", imatrix] if imatrix else []) + [src, dst, preset, "1"]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        err = [l for l in (p.stderr + p.stdout).splitlines() if "error" in l.lower() or "requires" in l.lower()]
        return {"error": (err[-1] if err else f"exit {p.returncode}").strip()[:200]}
    types, order, ft = types_of(dst)
    orders.add(tuple(order))
    return {"types": " ".join(types[n] for n, _, _ in m["tensors"]), "file_type": ft}

def differing_tensors(a, b):
    """The tensors whose type or bytes differ between two GGUF files (both readable)."""
    ra, rb = gguf.GGUFReader(a), gguf.GGUFReader(b)
    tb = {t.name: t for t in rb.tensors}
    out = []
    for t in ra.tensors:
        u = tb.get(t.name)
        if u is None or u.tensor_type != t.tensor_type or bytes(u.data.tobytes()) != bytes(t.data.tobytes()):
            out.append(t.name)
    return out

def check_bytes(a):
    """Convert every model with llama-quantize and with `QFORGE convert --preset` for every
    case gen.py records, and compare the two files byte for byte."""
    total, same, differ, both_refused, mismatch = 0, 0, [], 0, []
    only = a.presets.split(",") if a.presets else PRESETS
    for m in MODELS:
        if a.models and m["name"] not in a.models.split(","):
            continue
        src = os.path.join(a.work, m["name"] + ".gguf"); im = os.path.join(a.work, m["name"] + ".imatrix.dat")
        write_model(m, src); write_imatrix(m, im)
        cases = [(p, [], None) for p in PRESETS] + [(p, [], im) for p in PRESETS]
        cases += [(p, extra, None) for _, extra, presets in OPTION_SETS for p in presets]
        cases = [c for c in cases if c[0] in only]
        lq_out, qf_out = os.path.join(a.work, "lq.gguf"), os.path.join(a.work, "qf.gguf")
        for p, extra, imx in cases:
            label = f"{m['name']} {p}{' +imatrix' if imx else ''}{' ' + ' '.join(extra) if extra else ''}"
            for f in (lq_out, qf_out):
                if os.path.exists(f):
                    os.remove(f)
            iargs = ["--imatrix", imx] if imx else []
            lq = subprocess.run([a.llama_quantize] + extra + iargs + [src, lq_out, p, "2"], capture_output=True)
            qf = subprocess.run([a.check_bytes, "convert", src, qf_out, "--preset", p, "--threads", "2"] + extra + iargs,
                                capture_output=True)
            if lq.returncode != 0 and qf.returncode != 0:
                both_refused += 1
                continue
            if (lq.returncode != 0) != (qf.returncode != 0):
                mismatch.append(f"{label}: llama-quantize exit {lq.returncode}, qforge exit {qf.returncode}")
                continue
            total += 1
            with open(lq_out, "rb") as f1, open(qf_out, "rb") as f2:
                if f1.read() == f2.read():
                    same += 1
                    print("same:", label, flush=True)
                else:
                    differ.append(f"{label}: {', '.join(differing_tensors(lq_out, qf_out)[:4]) or 'metadata'}")
                    print("differs:", differ[-1], flush=True)
        print(m["name"], "done", file=sys.stderr)
    print(f"{same} of {total} runs byte-identical; {both_refused} refused by both; {len(mismatch)} refused by one")
    for d in differ:
        print("differs:", d)
    for d in mismatch:
        print("refusal mismatch:", d)
    return 0 if not mismatch else 1

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-quantize", required=True)
    ap.add_argument("--work", default=tempfile.mkdtemp(prefix="qforge-presets-"))
    ap.add_argument("--version", default="")
    ap.add_argument("--check-bytes", metavar="QFORGE", help="compare qforge's outputs with llama-quantize's instead")
    ap.add_argument("--models", default="", help="with --check-bytes: only these models (comma-separated)")
    ap.add_argument("--presets", default="", help="with --check-bytes: only these presets (comma-separated)")
    a = ap.parse_args()
    if a.check_bytes:
        sys.exit(check_bytes(a))
    out = {"generator": "tests/presets/gen.py", "llama_cpp": a.version, "models": []}
    for m in MODELS:
        src = os.path.join(a.work, m["name"] + ".gguf"); im = os.path.join(a.work, m["name"] + ".imatrix.dat")
        write_model(m, src); write_imatrix(m, im)
        cases, orders = {}, set()
        dst = os.path.join(a.work, "out.gguf")
        for p in PRESETS:
            cases[p] = run(a.llama_quantize, m, src, dst, p, [], None, orders)
            cases[p + " +imatrix"] = run(a.llama_quantize, m, src, dst, p, [], im, orders)
        for label, extra, presets in OPTION_SETS:
            for p in presets:
                cases[f"{p} {label}"] = run(a.llama_quantize, m, src, dst, p, extra, None, orders)
        assert len(orders) == 1, f"{m['name']}: llama-quantize wrote the tensors in {len(orders)} orders"
        names = [n for n, _, _ in m["tensors"]]
        print(m["name"], sum("error" in c for c in cases.values()), "errors of", len(cases), file=sys.stderr)
        out["models"].append({"name": m["name"], "arch": m["arch"], "hparams": m["hparams"],
                              "tensors": [[n, d, t] for n, d, t in m["tensors"]],
                              "llama_order": [names.index(n) for n in orders.pop()], "cases": cases})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=False)
    print("wrote", path, file=sys.stderr)

if __name__ == "__main__":
    main()
