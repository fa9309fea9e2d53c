import json,multiprocessing as mp,os,subprocess as sp,sys,tempfile,time
S={"asr":(1024,24,512),"tts":(1536,16,256),"emb":(768,12,128),"guard":(2048,8,256),"llm":(4096,32,64)}
T=8.0
C=[("mix4_15_pct25",[("asr",.15,25),("tts",.15,25),("emb",.15,25),("guard",.15,25)]),("mix4_15",[("asr",.15,None),("tts",.15,None),("emb",.15,None),("guard",.15,None)]),("mix4_20_pct25",[("asr",.2,25),("tts",.2,25),("emb",.2,25),("guard",.2,25)]),("mix3_20_pct33",[("asr",.2,33),("tts",.2,33),("emb",.2,33)]),("emb15_x4_pct25",[("emb",.15,25)]*4),("asr10_x4_pct25",[("asr",.1,25)]*4),("asr40_guard10",[("asr",.4,None),("guard",.1,None)]),("asr20_llm40",[("asr",.2,None),("llm",.4,None)]),("guard20_asr20_tts20_pct33",[("guard",.2,33),("asr",.2,33),("tts",.2,33)])]
def pc(v,q):return v[min(len(v)-1,max(0,int(round(q*(len(v)-1)))))]
def mem(i,n,rate,st,q,cap,pipe):
 if pipe:
  os.environ["CUDA_MPS_PIPE_DIRECTORY"]=pipe
  if cap:os.environ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"]=str(cap)
 import random,torch;h,L,t=S[n];d="cuda";b=torch.bfloat16
 W=[(torch.randn(h,h,device=d,dtype=b)/h**.5,torch.randn(h,h,device=d,dtype=b)/h**.5) for _ in range(L)];x0=torch.randn(t,h,device=d,dtype=b)
 def r():
  x=x0
  with torch.no_grad():
   for a,c in W:x=torch.nn.functional.gelu(x@a)@c
  torch.cuda.synchronize()
 e=time.perf_counter()+1.5
 while time.perf_counter()<e:r()
 while time.time()<st:time.sleep(.0005)
 t0=time.perf_counter();stop=t0+T;lat=[];g=random.Random(i*7919+int(st))
 if rate is None:
  while True:
   a=time.perf_counter()
   if a>=stop:break
   r();lat.append((time.perf_counter()-a)*1e3)
 else:
  a=t0
  while True:
   a+=g.expovariate(rate)
   if a>=stop:break
   w=a-time.perf_counter()
   if w>0:time.sleep(w)
   r();lat.append((time.perf_counter()-a)*1e3)
 el=time.perf_counter()-t0;lat.sort()
 q.put((i,{"name":n,"n":len(lat),"thr_rps":round(len(lat)/el,1),"p50":round(pc(lat,.5),3),"p90":round(pc(lat,.9),3),"p99":round(pc(lat,.99),3),"mean":round(sum(lat)/len(lat),3)}))
def run(ms,capa,mps):
 cx=mp.get_context("spawn");q=cx.Queue();pipe=None
 if mps:
  pipe=tempfile.mkdtemp();env=dict(os.environ,CUDA_MPS_PIPE_DIRECTORY=pipe,CUDA_MPS_LOG_DIRECTORY=tempfile.mkdtemp())
  sp.run(["nvidia-cuda-mps-control","-d"],env=env,check=True);time.sleep(1)
 st=time.time()+8+.5*len(ms);P=[]
 for i,(n,l,c) in enumerate(ms):
  p=cx.Process(target=mem,args=(i,n,None if l is None else l*capa[n],st,q,c,pipe));p.start();P.append(p)
 got=dict(q.get(timeout=120) for _ in P)
 for p in P:p.join()
 if mps:sp.run(["nvidia-cuda-mps-control"],input=b"quit\n",env=env,check=True);time.sleep(2)
 return [got[i] for i in range(len(ms))]
def sc(n,ms,f,mps):return {"scenario":n,"sharing":"mps" if mps else "time-slicing","closed":all(l is None for _,l,_ in ms),"members":f,"active_thread_pct":[c if mps else None for _,_,c in ms],"load_fraction":[l or 0 for _,l,_ in ms]}
def main():
 o=sys.argv[1];gn=sp.run(["nvidia-smi","--query-gpu=name","--format=csv,noheader"],capture_output=True,text=True).stdout.strip();cr=[];capa={};pr=[]
 for n in S:
  f=run([(n,None,None)],{},False);capa[n]=f[0]["thr_rps"];cr.append(sc(n+"_alone_closed",[(n,None,None)],f,False));print(n,f[0],flush=True)
 for n,ms in C:
  a=run(ms,capa,False);b=run(ms,capa,True);pr.append({"time-slicing":sc(n,ms,a,False),"mps":sc(n,ms,b,True)});print(n,[m["p99"] for m in a],[m["p99"] for m in b],flush=True)
  json.dump({"gpu":"H200-SXM","gpu_name":gn,"date":time.strftime("%Y-%m-%d",time.gmtime()),"seconds_per_scenario":T,"services":{k:{"hidden":v[0],"layers":v[1],"tokens_per_request":v[2]} for k,v in S.items()},"capacity":cr,"pairs":pr},open(o,"w"),indent=1)
if __name__=="__main__":main()
