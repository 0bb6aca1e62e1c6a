# httpd: the static HTTP server as an image FROM scratch — one static binary. It serves a
# local directory (scenario B) or an NFS export through its built-in NFSv3 client
# (scenario A), so it needs no kernel NFS mount and no privileges either way.
#
#   docker run -d -p 8080:8080 -v ~/www:/www:ro httpd --root /www
#   docker run -d --network lab -p 8080:8080 httpd --nfs nfs://rustnfs/nfs-share
FROM scratch
COPY httpd /httpd
EXPOSE 8080/tcp
# Prometheus text at /metrics, JSON at /metrics.json.
EXPOSE 9101/tcp
USER 65534:65534
# The binary probes itself: `HEAD /` on the listen address (0.0.0.0 is probed on
# 127.0.0.1), exit 0 on any HTTP answer within 3 s.
HEALTHCHECK --interval=5s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/httpd", "--healthcheck", "--listen", "0.0.0.0:8080"]
# httpd's flags have no environment variables: the listen and metrics addresses are part
# of the entrypoint, and `docker run ... httpd --root DIR` (or `--nfs URL`) appends the rest.
ENTRYPOINT ["/httpd", "--listen", "0.0.0.0:8080", "--metrics", "0.0.0.0:9101"]
