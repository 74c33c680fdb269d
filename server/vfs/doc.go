// Package vfs is the storage core of the virtual filesystem: the one parser
// of virtual paths and the content-addressed blob store on disk.
package vfs
