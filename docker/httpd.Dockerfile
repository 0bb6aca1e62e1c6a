# httpd: the static HTTP server as an image FROM scratch — one static binary. It serves a
# local directory (scenario B) or an NFS export through its built-in NFSv3 client
# (scenario A), so it needs no kernel NFS mount and no privileges either way.
#
#   docker run -d -p 8080:8080 -v ~/www:/www:ro httpd --root /www
#   docker run -d -p 8080:8080 httpd --nfs nfs://172.17.0.2/nfs-share   # rustnfs's address
FROM scratch
COPY httpd /httpd
EXPOSE 8080/tcp
# Prometheus text at /metrics, JSON at /metrics.json.
EXPOSE 9101/tcp
USER 65534:65534
# No HEALTHCHECK: a scratch image has no shell or curl, and a Docker healthcheck must exec a
# program inside the image. It needs a probe mode in the binary (`httpd --healthcheck`
# connecting to its own port); until then use the orchestrator's TCP/HTTP probes
# (docker/k8s/*.yaml) or `servelab load` from outside.
# httpd's flags have no environment variables: the listen and metrics addresses are part
# of the entrypoint, and `docker run ... httpd --root DIR` (or `--nfs URL`) appends the rest.
ENTRYPOINT ["/httpd", "--listen", "0.0.0.0:8080", "--metrics", "0.0.0.0:9101"]
