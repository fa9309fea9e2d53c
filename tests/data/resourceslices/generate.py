import json, hashlib, sys
def uuid(node, i):
    h = hashlib.sha256(f"{node}/{i}".encode()).hexdigest()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
def migid(node,i,s):
    h = hashlib.sha256(f"{node}/{i}/mig{s}".encode()).hexdigest()
    return f"MIG-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
ver = lambda v: {"version": v}
def gpu_attrs(node, i, product, arch, cc):
    return {
        "type": {"string": "gpu"}, "uuid": {"string": uuid(node, i)}, "productName": {"string": product},
        "brand": {"string": "Nvidia"}, "architecture": {"string": arch},
        "cudaComputeCapability": ver(cc), "driverVersion": ver("580.95.5"), "cudaDriverVersion": ver("13.0.0"),
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + 0x10*i:02x}:00.0"},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{0x10*(i//4):02x}"},
    }
def slice_(node, devices, driver="gpu.nvidia.com"):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}-x7k2p", "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": "0"}]},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}
def full(node, i, product, arch, cc, mem):
    return {"name": f"gpu-{i}", "attributes": gpu_attrs(node, i, product, arch, cc), "capacity": {"memory": {"value": mem}}}
def mig(node, i, product, arch, cc, profile, pid, start, size, sms, memmib):
    a = gpu_attrs(node, i, product, arch, cc)
    a.pop("uuid"); a["type"] = {"string": "mig"}
    a["parentUUID"] = {"string": uuid(node, i)}; a["profile"] = {"string": profile}; a["uuid"] = {"string": migid(node,i,start)}
    cap = {"multiprocessors": {"value": str(sms)}, "copyEngines": {"value": "3"}, "decoders": {"value": "2"}, "encoders": {"value": "0"},
           "jpegEngines": {"value": "0"}, "ofaEngines": {"value": "0"}, "memory": {"value": f"{memmib}Mi"}}
    for s in range(start, start+size): cap[f"memorySlice{s}"] = {"value": "1"}
    pname = profile.replace(".", "")
    return {"name": f"gpu-{i}-mig-{pname}-{pid}-{start}", "attributes": a, "capacity": cap}
A100 = ("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0")
H100 = ("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0")
L4 = ("NVIDIA L4", "Ada Lovelace", "8.9.0")
which = sys.argv[1]
if which == "voice-pipeline":
    n = "gpu-a100-1"
    devs = [full(n, 0, *A100, "80Gi"), mig(n, 1, *A100, "4g.40gb", 5, 0, 4, 56, 40192), mig(n, 1, *A100, "3g.40gb", 9, 4, 4, 42, 40192)]
    items = [slice_(n, devs), slice_(n, [], driver="compute-domain.nvidia.com")]
else:
    items = []
    for n in ["a100-node-1", "a100-node-2"]:
        items.append(slice_(n, [full(n, i, *A100, "80Gi") for i in range(8)]))
    for n in ["h100-node-1", "h100-node-2", "h100-node-3"]:
        items.append(slice_(n, [full(n, i, *H100, "80Gi") for i in range(8)]))
    n = "l4-node-1"
    items.append(slice_(n, [full(n, i, *L4, "23034Mi") for i in range(2)]))
print(json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}, indent=2))
