package main

var version = "devel"
var revision = ""
