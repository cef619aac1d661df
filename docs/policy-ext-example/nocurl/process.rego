# Refuse commands that pipe a download straight into a shell: the code
# runs before anyone has read it. A built-in process.deny pattern cannot
# say this, because the built-in module cuts commands at | and judges the
# pieces one by one; an operator module sees the whole command.
package paddock.ext.nocurl.process

deny contains "piping a download into a shell runs code nobody has read; save it to a file, read it, then run it" if {
	regex.match(`(^|[;&|\s])(curl|wget)\s[^;&|]*\|\s*(sudo\s+)?(ba|da|z|k)?sh(\s|$)`, input.command)
}
