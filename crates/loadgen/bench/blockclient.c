// Third opinion on HTTP latency for compare.sh: one C thread per keep-alive connection,
// blocking sockets (the kernel wakes each thread directly, no event loop), timing each
// request from its write to the response's last byte with CLOCK_MONOTONIC; the raw
// samples are sorted as they are, with no correction. Reconnects when the server closes.
// Build: gcc -O2 -D_GNU_SOURCE -pthread -o blockclient blockclient.c
// Usage: blockclient PORT PATH CONNECTIONS SECONDS   (127.0.0.1 only, at most 256)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
static int port, secs, nthreads; static const char *path;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct {double *lat; long n, cap;} res_t;
static double t_end;
static void *run(void *arg){ res_t *r=arg; r->cap=4000000; r->lat=malloc(r->cap*sizeof(double));
 struct sockaddr_in a={.sin_family=AF_INET,.sin_port=htons(port)}; a.sin_addr.s_addr=htonl(0x7f000001);
 int fd=-1, one=1; reconnect: if(fd>=0) close(fd); fd=socket(AF_INET,SOCK_STREAM,0);
 if(connect(fd,(void*)&a,sizeof a)){perror("connect");exit(1);} setsockopt(fd,IPPROTO_TCP,TCP_NODELAY,&one,4);
 char req[256]; int rl=snprintf(req,sizeof req,"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",path);
 static __thread char buf[65536]; long expect=-1;
 while(now()<t_end){ double t0=now(); if(write(fd,req,rl)!=rl){perror("write");exit(1);}
  long got=0; for(;;){ ssize_t k=read(fd,buf+got,sizeof buf-got); if(k<0){perror("read");exit(1);} if(k==0) goto reconnect; got+=k;
   if(expect<0){ char *h=memmem(buf,got,"\r\n\r\n",4); if(!h) continue; char *cl=strcasestr(buf,"content-length:"); expect=(h-buf)+4+atol(cl+15);}
   if(got>=expect) break; }
  r->lat[r->n++]=now()-t0; }
 return 0;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int c,char**v){ if(c!=5||atoi(v[3])<1||atoi(v[3])>256){fprintf(stderr,"usage: %s PORT PATH CONNECTIONS(1-256) SECONDS\n",v[0]);return 2;}
 port=atoi(v[1]); path=v[2]; nthreads=atoi(v[3]); secs=atoi(v[4]);
 pthread_t th[256]; res_t rs[256]={0}; double t0=now(); t_end=t0+secs;
 for(int i=0;i<nthreads;i++) pthread_create(&th[i],0,run,&rs[i]);
 long tot=0; for(int i=0;i<nthreads;i++){pthread_join(th[i],0); tot+=rs[i].n;}
 double el=now()-t0; double *all=malloc(tot*sizeof(double)); long k=0; double sum=0;
 for(int i=0;i<nthreads;i++) for(long j=0;j<rs[i].n;j++){all[k++]=rs[i].lat[j]; sum+=rs[i].lat[j];}
 qsort(all,tot,sizeof(double),cmp);
 printf("rps=%.0f mean=%.0fus p50=%.0fus p99=%.0fus\n", tot/el, sum/tot*1e6, all[tot/2]*1e6, all[(long)(tot*0.99)]*1e6); return 0;}
