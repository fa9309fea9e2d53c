# The driver that measured h200-mps-vs-ts-2026-12-02-16cpu.json and -4cpu.json (2026-12-02), exactly as it ran:
# `python3 measure_cpus.py OUT measure.py` (measure.py beside it: its services, run() and sc()). It writes
# OUT-16cpu.json (all 16 cores) and OUT-4cpu.json (the process and its children pinned to cores 0-3).
import sys,os,json
sys.path.insert(0,os.path.dirname(sys.argv[2]))
import measure as m
A=[("guard10_x4_pct25",[("guard",.1,25)]*4),("asr30_llmclosed",[("asr",.3,None),("llm",None,None)]),("tts30_llmclosed",[("tts",.3,None),("llm",None,None)]),("guard20_llmclosed_pct50",[("guard",.2,50),("llm",None,50)]),("emb20_llmclosed",[("emb",.2,None),("llm",None,None)]),("asr40_tts10_emb10_guard10_pct25",[("asr",.4,25),("tts",.1,25),("emb",.1,25),("guard",.1,25)]),("asr30_pct25",[("asr",.3,25)])]
B=[("guard10_x4_pct25",[("guard",.1,25)]*4),("asr20_x3_pct33",[("asr",.2,33)]*3),("asr35_tts35",[("asr",.35,None),("tts",.35,None)])]
if __name__=="__main__":
  cr=[];capa={};o=sys.argv[1]
  for n in m.S:
    f=m.run([(n,None,None)],{},False);capa[n]=f[0]["thr_rps"];cr.append(m.sc(n+"_alone_closed",[(n,None,None)],f,False));print(n,f[0])
  for tag,C,cpus in (("16cpu",A,None),("4cpu",B,{0,1,2,3})):
    if cpus:os.sched_setaffinity(0,cpus)
    print(tag,sorted(os.sched_getaffinity(0)));pr=[]
    for n,ms in C:
      a=m.run(ms,capa,False);b=m.run(ms,capa,True);pr.append({"time-slicing":m.sc(n,ms,a,False),"mps":m.sc(n,ms,b,True)});print(tag,n,[x["p99"] for x in a],[x["p99"] for x in b])
      json.dump({"gpu":"H200-SXM","cpus":tag,"capacity":cr,"pairs":pr},open(o+"-"+tag+".json","w"),indent=1)
