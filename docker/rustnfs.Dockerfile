# rustnfs: the userspace NFS server (v3, v4) as an image FROM scratch — one static
# binary, no shell, no kernel nfsd, no --privileged. Built by docker/build.sh (no
# registry needed).
#
#   docker run -d --name nfs-server -p 2049:2049 -v ~/nfs-data:/nfs-share \
#     -e SHARED_DIRECTORY=/nfs-share rustnfs
#   docker run -d --name nfs-server -p 2049:2049 -v ./exports:/etc/exports:ro \
#     -v /srv/media:/srv/media -v /srv/backup:/srv/backup rustnfs
#
# What is exported: SHARED_DIRECTORY (with READ_ONLY, PERMITTED, SQUASH, NO_ROOT_SQUASH:
# the names of the kernel-nfsd images users know, itsthenetwork/nfs-server-alpine);
# else an exports(5) file mounted at /etc/exports (or named by RUSTNFS_EXPORTS), several
# exports each with its clients and options, reloaded by `docker kill -s HUP`; else
# /nfs-share (RUSTNFS_DEFAULT_EXPORT).
FROM scratch
COPY rustnfs /rustnfs
ENV RUSTNFS_DEFAULT_EXPORT=/nfs-share \
    RUSTNFS_LISTEN=0.0.0.0:2049 \
    RUSTNFS_METRICS=0.0.0.0:9102
# NFS (v3, v4), MOUNT and the portmapper all answer on this one TCP port.
EXPOSE 2049/tcp
# Prometheus text at /metrics, JSON at /metrics.json.
EXPOSE 9102/tcp
# Root inside the container, with Docker's default capability set (no --privileged): each
# call acts as the client's uid/gid/groups (per-thread setfsuid/setfsgid/setgroups), so
# files are created as the client's users and the kernel checks their permissions. It
# needs CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_DAC_OVERRIDE and CAP_FOWNER (all in the
# default set; `--cap-drop ALL --cap-add` those five is enough). Client root acts as 65534
# (root_squash) unless NO_ROOT_SQUASH=true; SQUASH=UID:GID acts as that identity for all.
# Run with `--user UID:GID` and the server acts as that user and says so in one line.
USER 0:0
# The binary probes itself: an RPC NULL call to NFSv3 on RUSTNFS_LISTEN (0.0.0.0 is probed
# on 127.0.0.1), exit 0 when accepted within 3 s. PERMITTED must let 127.0.0.1 in.
HEALTHCHECK --interval=5s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/rustnfs", "--healthcheck"]
ENTRYPOINT ["/rustnfs"]
