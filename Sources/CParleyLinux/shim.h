// Linux-only headers that Swift's Glibc module leaves out.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <netinet/tcp.h>

// accept4 sits behind __USE_GNU in <sys/socket.h>, and Swift's Glibc module is built
// without _GNU_SOURCE; re-declare glibc's prototype.
extern int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
