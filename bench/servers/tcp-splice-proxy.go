// A native reference for the TCP benchmark (bench/tcp.ts): Go's io.Copy between two TCP
// connections, which on Linux moves the bytes with splice(2) through a pipe, never through
// user memory — as close to free as a user-space proxy gets. Half-closes are passed on.
// Usage: go build -o tcp-splice-proxy tcp-splice-proxy.go && ./tcp-splice-proxy PORT TARGET_PORT
// — prints "ready" once listening.
package main

import (
	"io"
	"net"
	"os"
)

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		panic(err)
	}
	os.Stdout.WriteString("ready\n")
	for {
		client, err := ln.Accept()
		if err != nil {
			continue
		}
		go serve(client.(*net.TCPConn), os.Args[2])
	}
}

func serve(client *net.TCPConn, target string) {
	conn, err := net.Dial("tcp", "127.0.0.1:"+target)
	if err != nil {
		client.Close()
		return
	}
	upstream := conn.(*net.TCPConn)
	done := make(chan struct{}, 2)
	pass := func(to, from *net.TCPConn) {
		io.Copy(to, from)
		to.CloseWrite()
		done <- struct{}{}
	}
	go pass(upstream, client)
	go pass(client, upstream)
	<-done
	<-done
	client.Close()
	upstream.Close()
}
