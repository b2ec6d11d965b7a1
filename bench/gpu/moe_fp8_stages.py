# moe_fp8_stages.py WS [SHAPE|all] [DEVICE]: the fused_moe_fp8 V0's scratch stages (a_q/a_scale, act_q/act_scale, slot_out,
# out) against the reference's own stages (vLLM's torch_experts), to find where the two part. WS: a workspace kwiki baseline has
# built for the GPU (kwiki plan --task data/tasks/vllm_fused_moe_fp8_block ...; kwiki baseline --no-timing). Session 17 found the
# group-scale rule with it (bench/results/moe_fp8_stages_h200-session17.txt). On the CPU the twin fills no scratch: GPU only.
import importlib.util, json, os, sys, torch
ws = sys.argv[1]; sys.path.insert(0, ws)
def load(n, p):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s); sys.modules[n] = m; s.loader.exec_module(m); return m
task = os.path.join(ws, "task")
factory = load("inp", os.path.join(task, "input.py")); R = load("reference", os.path.join(task, "reference.py"))
shapes = json.load(open(os.path.join(task, "shapes.json")))
dev = sys.argv[3] if len(sys.argv) > 3 else "cuda"
for sid in ([sys.argv[2]] if len(sys.argv) > 2 and sys.argv[2] != "all" else list(shapes)):
    spec = shapes[sid]
    inputs = factory._make_inputs(**spec["input_kwargs"], device=dev)
    km = load("kernel", os.path.join(ws, "kernel.py"))
    model = km.Model(**spec["init_kwargs"]).to(dev)
    fam, t, dims, params, outs, device, binding = model.launch_arguments(**inputs)
    T, H, I, E, K = (int(d) for d in dims[:5])
    rc = km._launch(fam, t, dims, params, device); torch.cuda.synchronize() if dev == "cuda" else None
    f8 = t[1].dtype
    x, w1, w2, w1s, w2s = inputs["hidden_states"], inputs["w1"], inputs["w2"], inputs["w1_scale"], inputs["w2_scale"]
    ids = inputs["topk_ids"].view(-1).long()
    print("==", sid, "rc", rc, "T H I E K", T, H, I, E, K)
    aq_ref, as_ref = R.per_token_group_quant_fp8(x.contiguous(), 128)
    aq = t[12].view(f8)
    print("a_q bytes differ:", int((aq.view(torch.uint8) != aq_ref.view(torch.uint8)).sum()), "of", aq.numel(), "| a_scale differ:", int((t[13] != as_ref).sum()))
    arep, asrep = aq_ref.repeat_interleave(K, 0), as_ref.repeat_interleave(K, 0)
    actq, acts, slot = t[14].view(f8), t[15], t[16]
    bad_q = bad_s = 0; worst_slot = 0.0; worst_slot_own = 0.0; shown = 0
    for e in range(E):
        m = ids == e
        if not bool(m.any()):
            continue
        tmp1 = R.native_w8a8_block_matmul(arep[m], w1[e], asrep[m], w1s[e], [128, 128], x.dtype)
        tmp2 = R.silu_and_mul(tmp1)
        q, s = R.per_token_group_quant_fp8(tmp2.contiguous(), 128)
        dq = actq[m].view(torch.uint8) != q.view(torch.uint8)
        bad_q += int(dq.sum()); bad_s += int((acts[m] != s).sum())
        if dq.any() and shown < 6:
            r, c = [int(v) for v in dq.nonzero()[0]]
            g = c // 128
            print("  e%d act row %d col %d: kernel %g ref %g; ref tmp2 %g scale ref %g kernel %g; tmp2/scale %.6f; gate %g up %g" % (
                e, r, c, float(actq[m][r, c].float()), float(q[r, c].float()), float(tmp2[r, c]), float(s[r, g]), float(acts[m][r, g]),
                float(tmp2[r, c].float() / s[r, g]), float(tmp1[r, c]), float(tmp1[r, I + c])))
            shown += 1
        y = R.native_w8a8_block_matmul(q, w2[e], s, w2s[e], [128, 128], x.dtype).float()
        y_own = R.native_w8a8_block_matmul(actq[m], w2[e], acts[m], w2s[e], [128, 128], x.dtype).float()
        worst_slot = max(worst_slot, float((slot[m] - y).abs().max()))
        worst_slot_own = max(worst_slot_own, float((slot[m] - y_own).abs().max()))
    print("act_q bytes differ:", bad_q, "of", actq.numel(), "| act_scale differ:", bad_s, "| slot_out vs ref: %.4g, vs ref on the kernel's act_q: %.4g" % (worst_slot, worst_slot_own))
    with torch.no_grad():
        ref = R.Model(**spec["init_kwargs"])(**inputs)
    print("out max abs err %.4g (max |ref| %.4g)" % (float((outs["out"].float() - ref.float()).abs().max()), float(ref.float().abs().max())))
