#!/bin/sh
# build.sh OUT — builds the Java SDK with the JDK's javac and jar, offline:
#   OUT/sandboxd-sdk.jar   the SDK (package dev.sandboxd), compiled for Java 17
#   OUT/test-classes/      the unit tests and the contract dump (src/test)
# and prints the class path to run against it (the jar and Debian's Jackson
# jars).  `make sdk-java` calls it with OUT=build/sdk-java.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT}
jackson=/usr/share/java
cp="$jackson/jackson-databind.jar:$jackson/jackson-core.jar:$jackson/jackson-annotations.jar"
for j in databind core annotations; do
  [ -f "$jackson/jackson-$j.jar" ] || {
    echo "build.sh: $jackson/jackson-$j.jar missing (libjackson2-databind-java: scripts/install-deps.sh)" >&2
    exit 1
  }
done
rm -rf "$out/classes" "$out/test-classes"
mkdir -p "$out/classes" "$out/test-classes"
javac --release 17 -Xlint:all,-try -Werror -encoding UTF-8 -cp "$cp" -d "$out/classes" \
  $(find "$here/src/main/java" -name '*.java' | sort)
# Class-Path lets `java -cp sandboxd-sdk.jar` find Debian's Jackson by itself.
printf 'Class-Path: %s\nImplementation-Title: sandboxd-sdk\nImplementation-Version: %s\n' \
  "file:$jackson/jackson-databind.jar file:$jackson/jackson-core.jar file:$jackson/jackson-annotations.jar" \
  "$(sed -n 's/.*VERSION = "\(.*\)";/\1/p' "$here/src/main/java/dev/sandboxd/SandboxdClient.java")" \
  > "$out/MANIFEST.MF"
jar --create --file "$out/sandboxd-sdk.jar" --manifest "$out/MANIFEST.MF" -C "$out/classes" .
javac --release 17 -Xlint:all,-try -Werror -encoding UTF-8 -cp "$out/sandboxd-sdk.jar:$cp" \
  -d "$out/test-classes" $(find "$here/src/test/java" -name '*.java' | sort)
echo "$out/sandboxd-sdk.jar:$cp"
