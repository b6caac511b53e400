"""The relay a sandboxed Python server runs behind: relay.ts's twin, for a server whose
interpreter is Python (it starts in a fifth of the time Node.js takes). Run inside the
sandbox as

    python3 -I -S relay.py SOCKET PORT FILE [ARGS...]

it starts FILE ARGS (the server, in the same process group, with the same environment and
output), and once the server takes connections on PORT listens on the Unix socket SOCKET (in the folder the grader shares with the
sandbox), and joins every connection made there to 127.0.0.1:PORT inside the sandbox. It
also listens on SOCKET.other (made before SOCKET, so it is there once SOCKET is), whose
connections reach the server from the client address 127.3.4.5 instead of 127.0.0.1: a
second client, as a retry from another machine or proxy is; where 127.3.4.5 cannot be
bound, SOCKET.other is not made. A connection the server refuses is closed. It exits when the server exits, with its exit
code (128 + the signal's number after a signal); SIGTERM and SIGINT reach the server
through the process group, so the relay itself waits for the server to end. Engine code
only: no lab specifics.
"""
import errno
import os
import select
import sys
import time
import _signal
import _socket
import _thread

# Only modules written in C (and os): the relay starts with every server of a check, and
# socket, selectors and threading, with the enum and re modules they load, would more than
# double its start-up time (about 37 ms against 15 ms of wall time here).

CHUNK = 65536
# The address connections made on SOCKET.other come from (any 127.x.y.z is loopback).
SECOND_CLIENT = "127.3.4.5"
READ, WRITE = select.EPOLLIN, select.EPOLLOUT


class Pipe:
    """One direction of a joined connection: what was read from `source` and not yet written to `sink`."""

    def __init__(self, source, sink):
        self.source, self.sink, self.pending, self.ended = source, sink, b"", False


class Relay:
    """Every joined connection, served by one thread with non-blocking sockets and one epoll:
    a thread per connection would reserve memory per thread (stacks, malloc arenas) that the
    sandbox's address-space limit does not leave room for."""

    def __init__(self, listeners, port):
        """listeners: (listening socket, the address its connections come from, or None for the default) pairs."""
        self.port = port
        self.poll = select.epoll()
        # Each listening socket's file descriptor: the socket and its connections' source address.
        self.listeners = {}
        for listener, source in listeners:
            self.listeners[listener.fileno()] = (listener, source)
            self.poll.register(listener.fileno(), READ)
        self.peer = {}
        # Each file descriptor in the epoll: its socket and the events it waits for.
        self.watched = {}

    def run(self):
        while True:
            try:
                ready = self.poll.poll()
            except InterruptedError:
                continue
            for fd, events in ready:
                if fd in self.listeners:
                    self.accept(*self.listeners[fd])
                    continue
                if fd not in self.watched:
                    continue
                sock = self.watched[fd][0]
                # A hang-up or an error is reported as readable and writable, as selectors does:
                # the next recv or send tells which.
                if events & ~READ:
                    events |= WRITE
                if events & ~WRITE:
                    events |= READ
                self.service(sock, events)

    def accept(self, listener, source):
        try:
            fd, _ = listener._accept()
        except OSError:
            return
        conn = _socket.socket(listener.family, listener.type, 0, fd)
        # A connect that does not wait: a server slow to accept (a short backlog) holds up
        # only this connection, whose bytes wait in its pipe meanwhile.
        upstream = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        upstream.setblocking(False)
        conn.setblocking(False)
        try:
            if source is not None:
                upstream.bind((source, 0))
        except OSError:
            upstream.close()
            conn.close()
            return
        if upstream.connect_ex(("127.0.0.1", self.port)) not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            upstream.close()
            conn.close()
            return
        down, up = Pipe(upstream, conn), Pipe(conn, upstream)
        # Each socket's entry: the pipe it is read by and the pipe it is written by.
        self.peer[conn] = (up, down)
        self.peer[upstream] = (down, up)
        self.watch(conn)
        self.watch(upstream)

    def service(self, sock, events):
        if sock not in self.peer:
            return
        reading, writing = self.peer[sock]
        if events & WRITE:
            self.flush(writing)
        if events & READ and sock in self.peer and not reading.ended:
            try:
                data = sock.recv(CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                reading.pending += data
                self.flush(reading)
            else:
                reading.ended = True
                self.flush(reading)

    def flush(self, pipe):
        """Writes what the pipe holds; closes the pair once a side has ended and all is written."""
        if pipe.sink not in self.peer:
            return
        try:
            while pipe.pending:
                sent = pipe.sink.send(pipe.pending)
                pipe.pending = pipe.pending[sent:]
        except BlockingIOError:
            pass
        except OSError:
            self.close(pipe)
            return
        if pipe.ended and not pipe.pending:
            self.close(pipe)
            return
        self.watch(pipe.sink)
        self.watch(pipe.source)

    def watch(self, sock):
        """Reads from a socket while its pipe has room and has not ended; waits to write to it
        while the pipe into it holds data; leaves it out of the epoll while neither."""
        if sock not in self.peer:
            return
        reading, writing = self.peer[sock]
        events = (READ if not reading.ended and len(reading.pending) < CHUNK else 0) | (WRITE if writing.pending else 0)
        fd = sock.fileno()
        was = self.watched[fd][1] if fd in self.watched else None
        if was == events:
            return
        if events:
            (self.poll.modify if was is not None else self.poll.register)(fd, events)
            self.watched[fd] = (sock, events)
        elif was is not None:
            self.poll.unregister(fd)
            del self.watched[fd]

    def close(self, pipe):
        for s in (pipe.source, pipe.sink):
            if s in self.peer:
                del self.peer[s]
                if self.watched.pop(s.fileno(), None) is not None:
                    self.poll.unregister(s.fileno())
                s.close()


def listening(port):
    """Whether something accepts connections on 127.0.0.1:port."""
    probe = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0
    except OSError:
        return False
    finally:
        probe.close()


def bindable(address):
    """Whether a TCP socket can be bound to `address` (port 0) here."""
    probe = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        probe.bind((address, 0))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def listen_on(path):
    """A Unix socket listening at `path`."""
    listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(1024)
    except OSError:
        listener.close()
        raise
    return listener


def main():
    if len(sys.argv) < 4 or not sys.argv[2].isdigit():
        sys.stderr.write("usage: relay.py SOCKET PORT FILE [ARGS...]\n")
        return 2
    socket_path, port, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(sig, lambda signum, frame: None)
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ, setsigdef=(_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP))
    except OSError as err:
        sys.stderr.write("cannot start %s: %s\n" % (argv[0], err.strerror))
        return 127
    # The socket appears once the server takes connections: the grader waits for the file
    # instead of sending requests that fail.
    ended = (0, 0)
    while not listening(port):
        ended = os.waitpid(pid, os.WNOHANG)
        if ended != (0, 0):
            break
        time.sleep(0.01)
    listeners = []
    # The second client's socket first: the grader takes SOCKET's presence for both. Without
    # it the grader sends the second client's requests through SOCKET, and says so.
    if bindable(SECOND_CLIENT):
        try:
            listeners.append((listen_on(socket_path + ".other"), SECOND_CLIENT))
        except OSError:
            pass
    try:
        listeners.append((listen_on(socket_path), None))
    except OSError as err:
        sys.stderr.write("relay: %s\n" % err.strerror)
    if listeners:
        # A thread the interpreter does not wait for at exit (as a daemon thread).
        _thread.start_new_thread(Relay(listeners, port).run, ())
    status = ended[1]
    while ended == (0, 0):
        ended = os.waitpid(pid, 0)
        status = ended[1]
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main())
